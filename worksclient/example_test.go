package worksclient_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/rlkit/rlkit/worksclient"
)

func ExampleAPIKey() {
	fmt.Println(worksclient.APIKey("PATCH", "/v1.0/users/a1b2c3@example.com?x=1"))
	fmt.Println(worksclient.APIKey("POST", "/v1.0/users/kim%40example.com/alias-emails/kim2%40example.com"))
	fmt.Println(worksclient.APIKey("PATCH", "/scim/v2/Users/7f0c3e2a-9b1d-4c5e-8f6a-0b1c2d3e4f5a"))
	fmt.Println(worksclient.APIKey("GET", "/v1.0/orgunits/10293847/members/"))
	fmt.Println(worksclient.APIKey("POST", "/oauth2/v2.0/token"))
	// Output:
	// PATCH /v1.0/users/{id}
	// POST /v1.0/users/{id}/alias-emails/{id}
	// PATCH /scim/v2/Users/{id}
	// GET /v1.0/orgunits/{id}/members
	// POST /oauth2/v2.0/token
}

func ExampleNewPacer() {
	p := worksclient.NewPacer(250 * time.Millisecond)
	ctx := context.Background()
	t0 := time.Now()
	_ = p.Wait(ctx, "PATCH /v1.0/users/{id}") // a free key starts at once
	_ = p.Wait(ctx, "GET /v1.0/orgunits")     // so does another key
	fmt.Println("two keys at once:", time.Since(t0) < 250*time.Millisecond)
	_ = p.Wait(ctx, "PATCH /v1.0/users/{id}") // the same key waits its turn
	fmt.Println("same key after 250ms:", time.Since(t0) >= 250*time.Millisecond)
	// Output:
	// two keys at once: true
	// same key after 250ms: true
}

func ExampleNewTransport() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path)
	}))
	defer api.Close()

	hc := &http.Client{Transport: worksclient.NewTransport(api.Client().Transport,
		worksclient.NewPacer(worksclient.DefaultInterval),
		worksclient.WithRetry(3, time.Minute), // 429/503 with Retry-After: again, within a minute
	)}
	for _, email := range []string{"kim@example.com", "lee@example.com"} { // one key: 250ms apart
		req, _ := http.NewRequest("PATCH", api.URL+"/v1.0/users/"+email, nil)
		resp, err := hc.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	// Output:
	// PATCH /v1.0/users/kim@example.com
	// PATCH /v1.0/users/lee@example.com
}

func ExampleClient_WithRateLimiter() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"userName": "kim"}`)
	}))
	defer api.Close()

	tokens := worksclient.TokenFunc(func(context.Context) (string, error) { return "access-token", nil })
	client, err := worksclient.NewClient(api.URL, worksclient.WithHTTPClient(api.Client()), worksclient.WithTokenSource(tokens))
	if err != nil {
		log.Fatal(err)
	}
	// Admin screens use client, unpaced; the relay worker gets a paced copy.
	relay := client.WithRateLimiter(worksclient.NewPacer(worksclient.DefaultInterval))

	var user struct {
		UserName string `json:"userName"`
	}
	if err := relay.Do(context.Background(), "GET", "/v1.0/users/kim@example.com", nil, &user); err != nil {
		log.Fatal(err)
	}
	fmt.Println(user.UserName)
	// Output: kim
}
