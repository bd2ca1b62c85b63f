// Command worksrelay is a Works API relay worker in miniature: it sends the
// messages of an in-memory outbox to a fake Works API, paced at 240
// requests a minute per API, only while it holds the relay's leader lock,
// and prints the spacing the API saw per API key.
//
//	go run ./examples/worksrelay
//	go run ./examples/worksrelay -redis redis://127.0.0.1:6379/0
//
// It shows how package worksclient is wired into a relay:
//
//   - The service's Works client (worksclient.NewClient) paces nothing; the
//     relay gets a paced copy from WithRateLimiter. Its OAuth token
//     requests go through the paced client too, under their own key
//     ("POST /oauth2/v2.0/token").
//   - The relay sends the messages of different APIs at once (one lane per
//     API key) and those of one API in order, each 250 ms after the last.
//   - It relays only inside worksredis.LeaderLock.Run. Without -redis
//     there is no lock (a single instance); with -redis the replica must
//     hold baron:worksmobile:relay:leader, and the pacing itself is shared
//     through Redis (worksredis.Pacer), so that spacing holds across a
//     change of leader too. Run two with the same -redis: one relays,
//     then the other, never both at once.
//
// The fake API listens on 127.0.0.1 (httptest) for as long as the program
// runs, which is about a second with the defaults. For each API key the
// program prints the smallest gap between two requests as the relay sent
// them, which the pacer keeps at 250 ms or more, and as the API received
// them, which adds a fraction of a millisecond of loopback and scheduling
// jitter either way: a real API across a network sees more. Pace at a
// slightly longer interval (-interval) if the API must never see less.
package main
