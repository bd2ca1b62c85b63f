package reload_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/reload"
)

const configTemplate = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: %q
`

func ExampleWatch() {
	dir, err := os.MkdirTemp("", "rlkit-reload")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "ratelimit.yaml")
	write := func(limit string) {
		if err := os.WriteFile(file, fmt.Appendf(nil, configTemplate, limit), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	write("10/minute")

	cfg, err := core.LoadConfig(file)
	if err != nil {
		log.Fatal(err)
	}
	lim := core.NewLimiter(cfg) // handed to an adapter: nethttp.New(lim), ...
	write("20/minute")          // the file changes before the watch starts

	ctx, cancel := context.WithCancel(context.Background())
	done, err := reload.Watch(ctx, lim, file)
	if err != nil {
		log.Fatal(err)
	}
	// Watch has brought lim up to the file before returning. From now on
	// every change is read once the directory has been quiet for 100ms.
	fmt.Println(lim.Config().Rule("search").Policy.Limits[0], lim.ReloadStats().Reloads)

	cancel() // at shutdown
	<-done
	// Output: 20/minute 1
}
