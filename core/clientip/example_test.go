package clientip_test

import (
	"fmt"
	"net/http"

	"github.com/rlkit/rlkit/core/clientip"
)

// Without trusted proxies every header is ignored: the client is the TCP
// peer, whatever X-Forwarded-For says. Behind a trusted proxy the header
// is read from the right, skipping the trusted hops.
func ExampleConfig_ClientIP() {
	h := http.Header{}
	h.Set("X-Forwarded-For", "203.0.113.7, 198.51.100.2, 10.0.0.5")

	var direct clientip.Config // trusts nobody
	fmt.Println(direct.ClientIP("10.0.0.1:52144", h.Values))

	proxies, err := clientip.ParseTrustedProxies("10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	behind := clientip.Config{TrustedProxies: proxies}
	fmt.Println(behind.ClientIP("10.0.0.1:52144", h.Values))  // 10.0.0.5 is trusted, 198.51.100.2 is not
	fmt.Println(behind.ClientIP("192.0.2.9:40000", h.Values)) // an untrusted peer: the header is ignored
	// Output:
	// 10.0.0.1
	// 198.51.100.2
	// 192.0.2.9
}

// IPv6 clients count per /64 unless IPv6PrefixLen says otherwise;
// ClientAddr keeps the whole address.
func ExampleConfig_ClientAddr() {
	var cfg clientip.Config
	fmt.Println(cfg.ClientIP("[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", nil))
	fmt.Println(cfg.ClientAddr("[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", nil))
	per48 := clientip.Config{IPv6PrefixLen: 48}
	fmt.Println(per48.ClientIP("[2001:db8:1:2::1]:443", nil))
	// Output:
	// 2001:db8:1:2::
	// 2001:db8:1:2:aaaa:bbbb:cccc:dddd
	// 2001:db8:1::
}

func ExampleParseTrustedProxies() {
	proxies, err := clientip.ParseTrustedProxies("10.0.0.0/8", " fd00::/8 ", "127.0.0.1")
	fmt.Println(proxies, err)
	_, err = clientip.ParseTrustedProxies("10.0.0.1/8")
	fmt.Println(err)
	// Output:
	// [10.0.0.0/8 fd00::/8 127.0.0.1/32] <nil>
	// clientip: trusted proxy "10.0.0.1/8": host bits set (did you mean 10.0.0.0/8?)
}
