package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/edgebyte/edgelimit/jwtkey"
)

// authFloodCaddyfile limits /api/ by two rules of 10 requests a day (a
// day, so that no window edge falls within a run), each holding at most
// MAX_KEYS keys: tokens keys by the raw Authorization value, so that every
// distinct value is a key of its own; users by the verified token's sub,
// falling back to the client IP for a request whose token fails. Rules of
// one handler are all-or-nothing: a request users denies takes nothing
// from tokens.
const authFloodCaddyfile = `{
	{{.Global}}
	rate_limit {
		jwt {
			hmac_secret {env.EDGELIMIT_JWT_SECRET}
			algorithms HS256
			issuer https://id.example.com/
		}
	}
}
:{{.HTTP}} {
	rate_limit /api/* {
		limit 10 1d
		max_keys MAX_KEYS
		rule tokens {
			by header Authorization
		}
		rule users {
			by jwt sub
			on_missing_key ip
		}
	}
	respond "ok"
}
`

// The kinds of token the Authorization flood sends.
const (
	tokValid     = iota // HS256 with the right secret, a sub of its own
	tokSignature        // HS256 signed with another secret
	tokAlgNone          // alg: none
	tokMalformed        // not a JWT at all
	tokKinds
)

// tokReasons are the reasons caddy_rate_limit_jwt_failures_total counts
// each forged kind under.
var tokReasons = [tokKinds]string{tokSignature: "signature", tokAlgNone: "algorithm", tokMalformed: "malformed"}

// floodToken is the flood's i-th token, never sent before: even i are
// valid tokens of sub user-i, odd i forged ones, the three kinds in turn.
func floodToken(i int64) (string, int, error) {
	claims := userClaims(fmt.Sprintf("user-%d", i))
	if i%2 == 0 {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(jwtSecret))
		return s, tokValid, err
	}
	switch kind := 1 + int(i/2)%3; kind {
	case tokSignature:
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("an attacker's guess at the secret"))
		return s, kind, err
	case tokAlgNone:
		s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
		return s, kind, err
	default:
		if i%4 == 1 {
			return fmt.Sprintf("garbage-%d", i), kind, nil
		}
		return fmt.Sprintf("%d.not-json.%d", i, i), kind, nil // three segments, none of them JSON
	}
}

// metricFloat is a sample's value in a Prometheus exposition (which writes
// 1000000 as 1e+06), or -1 if the sample is absent.
func metricFloat(t *testing.T, exposition, sample string) float64 {
	t.Helper()
	v := metricValue(t, exposition, sample)
	if v == "absent" {
		return -1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number", sample, v)
	}
	return f
}

// TestAuthorizationFlood: EDGELIMIT_AUTH_FLOOD_KEYS (100,000 by default;
// BENCHMARKS.md has a run of 1,000,000) never-repeating Authorization
// values from 16 connections at full speed, half validly signed tokens of
// subjects never seen before, half forged (bad signature, alg none,
// malformed). Each is counted or rejected as documented:
//   - nothing but 200 and 429;
//   - every valid token gets its 200 (a new subject, a new Authorization
//     value);
//   - the forged tokens give no key of their own: all fall back to the
//     client IP's counter, so exactly 10 of them pass, and each is counted
//     by reason in caddy_rate_limit_jwt_failures_total, exactly;
//   - both rules hold at most max_keys keys and count their evictions; the
//     users rule's keys and evictions add up to exactly the subjects seen
//     and the fallback IP;
//   - RSS stays within 64 MB of idle, and the goroutines go back to their
//     idle count once the connections close;
//   - a client with one valid token asking every 20 ms through the flood
//     keeps its counter: exactly 10 200s, then 429s.
func TestAuthorizationFlood(t *testing.T) {
	keys, maxKeys := envInt(t, "EDGELIMIT_AUTH_FLOOD_KEYS", 100_000), 20_000
	p := startCaddy(t, strings.ReplaceAll(authFloodCaddyfile, "MAX_KEYS", fmt.Sprint(maxKeys)), "EDGELIMIT_JWT_SECRET="+jwtSecret)
	wantStatuses(t, "warm-up", p.statuses(t, 1, "/api/x", bearer(hs256(t, userClaims("warm-up-user")))...), seq(1, 200, 0, 0))
	legitToken := hs256(t, userClaims("legit-user"))
	p.client.CloseIdleConnections()
	idleRoutines := p.goroutines(t)
	idle := p.rss(t)

	var failed atomic.Int64
	var sent [tokKinds]atomic.Int64
	var got [tokKinds][2]atomic.Int64 // by kind: 200s, 429s
	var firstErr atomic.Value
	start := time.Now()
	fl := startFlood(int64(keys), 16, func(i int64) {
		tok, kind, err := floodToken(i)
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprint("signing: ", err))
			return
		}
		sent[kind].Add(1)
		code, _, err := p.rawGet(context.Background(), "/api/x", "Authorization", "Bearer "+tok)
		switch {
		case err == nil && code == http.StatusOK:
			got[kind][0].Add(1)
		case err == nil && code == http.StatusTooManyRequests:
			got[kind][1].Add(1)
		default:
			failed.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprintf("token kind %d: %d %v", kind, code, err))
		}
	})
	// a real client, asking every 20 ms through the flood: 10 allowed in
	// the day, then 429s, its counter never reset
	legit := map[int]int{}
	for !fl.finished() {
		legit[p.status(t, "/api/x", bearer(legitToken)...)]++
		time.Sleep(20 * time.Millisecond) // the client's pace
	}
	fl.wait()
	took := time.Since(start)
	grown := p.rss(t) - idle

	var tokens, users adminRule
	p.adminJSON(t, "/rate_limit/rules/tokens", &tokens)
	p.adminJSON(t, "/rate_limit/rules/users", &users)
	var fallback, legitKey adminKey
	p.adminJSON(t, "/rate_limit/rules/users/keys/"+url.PathEscape("\x00127.0.0.1"), &fallback)
	p.adminJSON(t, "/rate_limit/rules/tokens/keys/"+url.PathEscape("Bearer "+legitToken), &legitKey)
	code, metrics := p.admin(t, http.MethodGet, "/metrics", "")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	failures := map[string]float64{}
	for _, reason := range jwtkey.Reasons() { // every value of the label
		failures[reason] = metricFloat(t, metrics, `caddy_rate_limit_jwt_failures_total{reason="`+reason+`"}`)
	}
	p.client.CloseIdleConnections()
	routines := p.goroutines(t)
	for deadline := time.Now().Add(5 * time.Second); routines > idleRoutines+5 && time.Now().Before(deadline); routines = p.goroutines(t) {
		time.Sleep(50 * time.Millisecond) // connections closing
	}

	valid := sent[tokValid].Load()
	var forged, forged200, forged429 int64
	for kind := tokSignature; kind < tokKinds; kind++ {
		forged += sent[kind].Load()
		forged200 += got[kind][0].Load()
		forged429 += got[kind][1].Load()
	}
	t.Logf("%d Authorization values (%d valid, %d forged: %d bad signature, %d alg none, %d malformed) in %v (%.0f/s); "+
		"valid: %d×200 %d×429; forged: %d×200 %d×429; %d failed",
		keys, valid, forged, sent[tokSignature].Load(), sent[tokAlgNone].Load(), sent[tokMalformed].Load(),
		took.Round(time.Millisecond), float64(keys)/took.Seconds(),
		got[tokValid][0].Load(), got[tokValid][1].Load(), forged200, forged429, failed.Load())
	t.Logf("rule tokens: %d live, %d evicted, %+v; rule users: %d live, %d evicted, %+v; jwt failures %v",
		tokens.Keys, tokens.Evictions, tokens.Requests, users.Keys, users.Evictions, users.Requests, failures)
	t.Logf("RSS %d MB idle, +%.1f MB; goroutines %d idle, %d after; legit client: %v",
		idle>>20, float64(grown)/(1<<20), idleRoutines, routines, legit)

	if failed.Load() != 0 {
		t.Errorf("%d flood requests not answered 200 or 429 (first: %v)", failed.Load(), firstErr.Load())
	}
	if got[tokValid][0].Load() != valid {
		t.Errorf("valid tokens of new subjects: %d×200 of %d (%d×429), want all 200", got[tokValid][0].Load(), valid, got[tokValid][1].Load())
	}
	// every forged token falls back to the one IP key: 10 pass, no more
	if forged200 != 10 || forged429 != forged-10 {
		t.Errorf("forged tokens: %d×200 and %d×429 of %d, want exactly 10×200: they share the client IP's counter", forged200, forged429, forged)
	}
	if len(fallback.Limits) != 1 || fallback.Limits[0].Used != 10 {
		t.Errorf("users' fallback key for 127.0.0.1: %+v, want 10 used", fallback)
	}
	for kind := tokSignature; kind < tokKinds; kind++ {
		if want := float64(sent[kind].Load()); failures[tokReasons[kind]] != want {
			t.Errorf("jwt failures %s: %v, want %v", tokReasons[kind], failures[tokReasons[kind]], want)
		}
	}
	for reason, n := range failures {
		if reason != "signature" && reason != "algorithm" && reason != "malformed" && n != 0 {
			t.Errorf("jwt failures %s: %v, want 0", reason, n)
		}
	}

	// users: keys for the subjects seen (the flood's valid ones, warm-up,
	// legit) and the fallback IP; none is idle in the day, so every one
	// is live or was evicted
	if want := uint64(valid + 3); users.Keys > maxKeys || uint64(users.Keys)+users.Evictions != want {
		t.Errorf("users: %d live keys, %d evicted; want at most %d live, and %d in all", users.Keys, users.Evictions, maxKeys, want)
	}
	// tokens: a key for every Authorization value (the flood's, warm-up,
	// legit); those of the forged tokens users denied were given back and
	// may have been swept as idle, but the others, holding a request,
	// were evicted if not live
	if busy := valid + 10 + 2; tokens.Keys > maxKeys || tokens.Evictions < uint64(max(0, busy-int64(maxKeys))) || uint64(tokens.Keys)+tokens.Evictions > uint64(keys+2) {
		t.Errorf("tokens: %d live keys, %d evicted; want at most %d live, at least %d evicted, at most %d in all",
			tokens.Keys, tokens.Evictions, maxKeys, max(0, busy-int64(maxKeys)), keys+2)
	}
	// each rule's own decisions: tokens allowed every flood request (then
	// gave back what users denied) and denied the legit client once it
	// was out; users was never asked about the legit client's 429s
	legit429 := uint64(legit[http.StatusTooManyRequests])
	if want := (adminRequests{Allowed: uint64(keys) + 1 + 10, Denied: legit429}); tokens.Requests != want {
		t.Errorf("tokens requests %+v, want %+v", tokens.Requests, want)
	}
	if want := (adminRequests{Allowed: uint64(valid) + 10 + 1 + 10, Denied: uint64(forged - 10)}); users.Requests != want {
		t.Errorf("users requests %+v, want %+v", users.Requests, want)
	}

	if legit[200] != 10 || len(legit) != 2 || legit[429] < 1 {
		t.Errorf("the real client got %v, want 10×200 then 429s", legit)
	}
	if len(legitKey.Limits) != 1 || legitKey.Limits[0].Used != 10 {
		t.Errorf("tokens' key of the real client: %+v, want 10 used", legitKey)
	}
	if grown > 64<<20 {
		t.Errorf("RSS grew by %d MB, want under 64", grown>>20)
	}
	if routines > idleRoutines+5 {
		t.Errorf("goroutines: %d idle before the flood, %d after its connections closed", idleRoutines, routines)
	}
}
