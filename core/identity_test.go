package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/rlkit/rlkit/core/store"
)

func hmacHex(key, msg string) string {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(msg))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func TestSecretIdentityKey(t *testing.T) {
	const secret = "sk_live_0123456789"
	id := SecretIdentity("X-Api-Key", secret)
	if id != SecretIdentity("X-Api-Key", secret) {
		t.Fatalf("HeaderIdentity is not a SecretIdentity")
	}
	l := NewLimiter(nil)
	want := "X-Api-Key:hmac:" + hmacHex(defaultIdentityKey, secret)
	if got := l.Key(id); got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
	keyed := NewLimiter(nil, WithIdentityKey([]byte("k3y")))
	if got, want := keyed.Key(id), "X-Api-Key:hmac:"+hmacHex("k3y", secret); got != want {
		t.Errorf("WithIdentityKey: Key = %q, want %q", got, want)
	}
	if a, b := NewLimiter(nil, WithIdentityKey([]byte("k3y"))).Key(id), keyed.Key(id); a != b {
		t.Errorf("two limiters with one key: %q and %q", a, b)
	}
	// Every other identity is as it is, bounded.
	for _, id := range []string{"user:alice", "203.0.113.9", "\x00no end mark", strings.Repeat("u", 200)} {
		if got := l.Key(id); got != store.BoundKey(id) {
			t.Errorf("Key(%.20q) = %.30q, want BoundKey", id, got)
		}
	}
	// A long label is bounded too.
	if got := l.Key(SecretIdentity(strings.Repeat("L", 200), secret)); !strings.HasPrefix(got, "sha256:") || len(got) > store.MaxKeyLen {
		t.Errorf("a long label: Key = %.40q, want a bounded digest", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = l.Key(id) }); n > 1 && !raceOn {
		t.Errorf("Key of a secret identity: %v allocations, want at most 1 (the key)", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = l.Key("user:alice") }); n != 0 {
		t.Errorf("Key of a plain identity: %v allocations, want 0", n)
	}
}

// TestSecretNeverStoredNorLogged counts a header identity under a shadow
// rule until it logs, and checks that neither the store nor the log nor
// the observer sees the secret.
func TestSecretNeverStoredNorLogged(t *testing.T) {
	const secret = "sk_live_SECRET"
	cfg, err := ParseConfig([]byte(shadowYAML), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	var keys []string
	st := newFakeStore()
	l := NewLimiter(cfg, WithStore(st), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		WithObserver(func(e Event) { keys = append(keys, e.Key) }))
	id := SecretIdentity("X-Api-Key", secret)
	for range 3 {
		d := l.Decide(t.Context(), "GET", "/api/search", id, false)
		if want := l.Key(id); d.Key != want {
			t.Fatalf("Decision.Key = %q, want %q", d.Key, want)
		}
		if s := fmt.Sprintf("%+v", d); strings.Contains(s, secret) {
			t.Fatalf("the Decision holds the secret: %s", s)
		}
	}
	fl := NewLimiter(cfg, WithStore(&failStore{}), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	fl.Decide(t.Context(), "GET", "/api/upload", id, false)
	var seen []string
	for _, c := range st.calls {
		seen = append(seen, c.key)
	}
	seen = append(seen, keys...)
	seen = append(seen, logs.String())
	for _, s := range seen {
		if strings.Contains(s, secret) {
			t.Errorf("the secret is in %q", s)
		}
	}
	if !strings.Contains(logs.String(), "key=X-Api-Key:hmac:"+hmacHex(defaultIdentityKey, secret)) {
		t.Errorf("the shadow denial's log line does not name the hashed key:\n%s", logs.String())
	}
}

// TestPlainKeysCannotSpellSecrets: a plain identity shaped like a secret
// identity's key (a client's own header value, say) is digested, so it
// never counts against that secret's counter.
func TestPlainKeysCannotSpellSecrets(t *testing.T) {
	l := NewLimiter(nil)
	victim := l.Key(SecretIdentity("X-Api-Key", "alice-api-key"))
	if got := l.Key(victim); got == victim || !strings.HasPrefix(got, "sha256:") {
		t.Errorf("Key(%q) = %q, want a digest", victim, got)
	}
}
