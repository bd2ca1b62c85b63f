package worksclient_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/rlkit/rlkit/worksclient"
)

func TestAPIKey(t *testing.T) {
	tests := []struct {
		method, path, want string
	}{
		// The examples of the Works API documentation.
		{"POST", "/v1.0/users", "POST /v1.0/users"},
		{"PATCH", "/v1.0/users/a1b2c3@example.com?x=1", "PATCH /v1.0/users/{id}"},
		{"POST", "/v1.0/users/kim@example.com/alias-emails/kim.alias@example.com", "POST /v1.0/users/{id}/alias-emails/{id}"},
		{"GET", "/v1.0/orgunits", "GET /v1.0/orgunits"},
		{"PATCH", "/scim/v2/Users/7f0c3e2a-9b1d-4c5e-8f6a-0b1c2d3e4f5a", "PATCH /scim/v2/Users/{id}"},
		{"POST", "/oauth2/v2.0/token", "POST /oauth2/v2.0/token"},
		// Directory API.
		{"GET", "/v1.0/users/7f0c3e2a-9b1d-4c5e-8f6a-0b1c2d3e4f5a", "GET /v1.0/users/{id}"},
		{"PUT", "/v1.0/users/lee.jisoo@works.example.co.kr", "PUT /v1.0/users/{id}"},
		{"DELETE", "/v1.0/users/lee.jisoo@works.example.co.kr", "DELETE /v1.0/users/{id}"},
		{"GET", "/v1.0/users?count=100&cursor=abc", "GET /v1.0/users"},
		{"GET", "/v1.0/users/", "GET /v1.0/users"},
		{"DELETE", "/v1.0/users/kim@example.com/alias-emails/old%40example.com", "DELETE /v1.0/users/{id}/alias-emails/{id}"},
		{"GET", "/v1.0/orgunits/10293847", "GET /v1.0/orgunits/{id}"},
		{"PATCH", "/v1.0/orgunits/externalKey:sales-01", "PATCH /v1.0/orgunits/{id}"},
		{"GET", "/v1.0/orgunits/10293847/members?count=50", "GET /v1.0/orgunits/{id}/members"},
		{"GET", "/v1.0/groups/5d7c9e1f-3a2b-4c6d-8e0f-1a2b3c4d5e6f/members", "GET /v1.0/groups/{id}/members"},
		{"GET", "/v1.0/domains/300012345/levels", "GET /v1.0/domains/{id}/levels"},
		{"GET", "/v1.0/domains/300012345/employment-types/", "GET /v1.0/domains/{id}/employment-types"},
		{"PUT", "/v1.0/users/kim@example.com/photo", "PUT /v1.0/users/{id}/photo"},
		// Bots, calendars, boards, drive.
		{"POST", "/v1.0/bots/2000123/users/kim@example.com/messages", "POST /v1.0/bots/{id}/users/{id}/messages"},
		{"POST", "/v1.0/bots/2000123/channels/b1c2d3e4-f5a6-7b8c-9d0e-1f2a3b4c5d6e/messages", "POST /v1.0/bots/{id}/channels/{id}/messages"},
		{"POST", "/v1.0/bots/2000123/attachments", "POST /v1.0/bots/{id}/attachments"},
		{"GET", "/v1.0/users/me/calendars/c_400123_abcdef/events?fromDateTime=2026-06-09T00:00:00%2B09:00", "GET /v1.0/users/me/calendars/{id}/events"},
		{"GET", "/v1.0/boards/4070000000012345/posts/1/comments", "GET /v1.0/boards/{id}/posts/{id}/comments"},
		{"GET", "/v1.0/users/kim@example.com/drive/files/QDEwMDExNTAwMDAwMDAwMDF8MzQ3MjYyMjAxMDU2NzAxNDQ0MXxGfDA/children", "GET /v1.0/users/{id}/drive/files/{id}/children"},
		// SCIM.
		{"GET", "/scim/v2/Users?filter=userName%20eq%20%22kim%22", "GET /scim/v2/Users"},
		{"POST", "/scim/v2/Users", "POST /scim/v2/Users"},
		{"DELETE", "/scim/v2/Groups/0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d/", "DELETE /scim/v2/Groups/{id}"},
		{"GET", "/scim/v2/ServiceProviderConfig", "GET /scim/v2/ServiceProviderConfig"},
		// Encoded segments are decoded before classifying.
		{"PATCH", "/v1.0/users/kim%40example.com", "PATCH /v1.0/users/{id}"},
		{"POST", "/v1.0/users/kim%40example.com/alias%2Demails", "POST /v1.0/users/{id}/alias-emails"},
		{"GET", "/v1.0/users/a%2Fb", "GET /v1.0/users/{id}"},
		{"GET", "/v1.0/users/%zz", "GET /v1.0/users/{id}"},
		// Numbers, versions, odd forms.
		{"GET", "/v1.0/users/12345", "GET /v1.0/users/{id}"},
		{"GET", "/v2/users/1", "GET /v2/users/{id}"},
		{"GET", "/v1.0.0.0/users", "GET /{id}/users"},
		{"GET", "/v1234/users", "GET /{id}/users"},
		{"get", "//v1.0//users//", "GET /v1.0/users"},
		{"", "/v1.0/users", "GET /v1.0/users"},
		{"GET", "", "GET /"},
		{"GET", "/?x=1", "GET /"},
		{"GET", "https://www.worksapis.com/v1.0/users/kim@example.com?x=1#f", "GET /v1.0/users/{id}"},
		{"GET", "/v1.0/users/emp01", "GET /v1.0/users/{id}"},
		{"GET", "/v1.0/users/{id}", "GET /v1.0/users/{id}"},
		{"BAD METHOD", "/x", "BAD_METHOD /x"},
	}
	for _, tt := range tests {
		if got := worksclient.APIKey(tt.method, tt.path); got != tt.want {
			t.Errorf("APIKey(%q, %q) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
		// A key is stable: its own method and path give it back.
		method, path, _ := cut(tt.want)
		if got := worksclient.APIKey(method, path); got != tt.want {
			t.Errorf("APIKey of key %q = %q, want it unchanged", tt.want, got)
		}
	}
}

func cut(key string) (method, path string, ok bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == ' ' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}

var keyForm = regexp.MustCompile(`^[!#$%&'*+\-.^_` + "`" + `|~0-9A-Z]+ /([^/ ?#]+(/[^/ ?#]+)*)?$`)

func FuzzAPIKey(f *testing.F) {
	for _, s := range []string{
		"/v1.0/users/a1b2c3@example.com?x=1", "/oauth2/v2.0/token", "/scim/v2/Users/7f0c3e2a-9b1d",
		"", "/", "//", "%", "/%2F%25", "http://h", "x://", "/a b", "/{id}", "/v1.0/a%2Dmails",
	} {
		f.Add("PATCH", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		key := worksclient.APIKey(method, path)
		if !keyForm.MatchString(key) {
			t.Fatalf("APIKey(%q, %q) = %q, not of the form \"METHOD /path\"", method, path, key)
		}
		m, p, _ := cut(key)
		if again := worksclient.APIKey(m, p); again != key {
			t.Fatalf("APIKey(%q, %q) = %q, but APIKey of that key = %q", method, path, key, again)
		}
	})
}

func TestTemplates(t *testing.T) {
	tr := worksclient.NewTransport(nil, nil, worksclient.WithTemplates(
		"/v1.0/users/{userId}",
		"/v1.0/users/{userId}/photo",
		"GET /v1.0/users/me",
		"  PATCH /v1.0/orgunits/{orgUnitId}/  ",
		"/v1.0/bots/{botId}/users/{userId}/messages",
	))
	tests := []struct {
		method, path, want string
	}{
		{"GET", "/v1.0/users/alice", "GET /v1.0/users/{id}"},  // the heuristic would keep "alice"
		{"GET", "/v1.0/users/me", "GET /v1.0/users/me"},       // more literal segments win
		{"PATCH", "/v1.0/users/me", "PATCH /v1.0/users/{id}"}, // "GET /v1.0/users/me" is GET only
		{"PUT", "/v1.0/users/alice/photo?x=1", "PUT /v1.0/users/{id}/photo"},
		{"PATCH", "/v1.0/orgunits/sales", "PATCH /v1.0/orgunits/{id}"},
		{"GET", "/v1.0/orgunits/sales", "GET /v1.0/orgunits/sales"}, // PATCH only: the heuristic
		{"POST", "/v1.0/bots/bot/users/bob/messages", "POST /v1.0/bots/{id}/users/{id}/messages"},
		{"POST", "/v1.0/users/alice/alias-emails", "POST /v1.0/users/alice/alias-emails"}, // no template
		{"GET", "/v1.0/users%2Falice", "GET /v1.0/{id}"},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, "https://www.worksapis.com"+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Key(req); got != tt.want {
			t.Errorf("Key(%s %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestWithKeyFunc(t *testing.T) {
	tr := worksclient.NewTransport(nil, nil,
		worksclient.WithKeyFunc(func(method, path string) string { return "all" }),
		worksclient.WithTemplates("/v1.0/users/{id}"))
	for path, want := range map[string]string{"/v1.0/users/alice": "GET /v1.0/users/{id}", "/v1.0/groups": "all"} {
		req, _ := http.NewRequest("GET", "http://x"+path, nil)
		if got := tr.Key(req); got != want {
			t.Errorf("Key(GET %s) = %q, want %q", path, got, want)
		}
	}
}
