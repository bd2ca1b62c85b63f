package ginrl_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/ginrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// TestHostileReverseProxyAbortCounted checks that the following does not happen:
//
// As in nethttp: a gin.Default() router (Recovery) whose handler is an
// httputil.ReverseProxy streaming a backend's answer; each client reads
// the status line and closes, the proxy panics with http.ErrAbortHandler,
// Recovery catches it outside the middleware, and Limiter.Complete never
// runs: a `count: successes` quota (or a `count: failures` guard) counts
// none of them.
func TestHostileReverseProxyAbortCounted(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, tc := range []struct {
		mode   string
		status int
	}{{"successes", http.StatusOK}, {"failures", http.StatusUnauthorized}} {
		t.Run(tc.mode, func(t *testing.T) {
			backend := adaptertest.ServeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte("first chunk of a long answer\n"))
				http.NewResponseController(w).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			}))
			u, _ := url.Parse(backend)
			cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: export
      paths: ["/export"]
      limit: "2/minute"
      count: `+tc.mode+`
`), "hostile.yaml")
			if err != nil {
				t.Fatal(err)
			}
			r := gin.New()
			// done says when the server has finished a request (the
			// middleware's count included), panic or not, so that the
			// next request never meets this one in flight.
			done := make(chan struct{}, 6)
			finished := func(c *gin.Context) {
				defer func() { done <- struct{}{} }()
				c.Next()
			}
			r.Use(gin.RecoveryWithWriter(io.Discard), finished, ginrl.New(cfg))
			proxy := httputil.NewSingleHostReverseProxy(u)
			r.GET("/export", gin.WrapH(proxy))
			base := adaptertest.ServeHTTP(t, r)
			addr := strings.TrimPrefix(base, "http://")
			served := 0
			for range 6 {
				c, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Write([]byte("GET /export HTTP/1.1\r\nHost: x\r\n\r\n"))
				line, err := bufio.NewReader(c).ReadString('\n')
				c.Close()
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(line, "HTTP/1.1 "+strconv.Itoa(tc.status)) {
					served++
				}
				select { // the proxy notices and aborts
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("the server did not finish a request within 5s of its client closing")
				}
			}
			if served > 2 {
				t.Errorf("count: %s, limit 2/minute: %d of 6 requests answered %d (each client closed mid-response); want at most 2 before 429", tc.mode, served, tc.status)
			}
		})
	}
}
