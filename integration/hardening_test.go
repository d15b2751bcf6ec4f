package integration

// The attacks of an outside bypass hunt, replayed against a real Caddy:
// each test sends what the attacker sent and asserts that it no longer
// works (docs/DESIGN.md, "Hardening rules").

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// junkCaddyfile has one rule an algorithm, each keyed by the query
// parameter k, 5 an hour, at most 1,000 keys: the rule of the hunt.
const junkCaddyfile = plainGlobals + `
:{{.HTTP}} {
	rate_limit /sliding_window/* {
		name sliding_window
		limit 5 1h
		by query k
		max_keys 1000
	}
	rate_limit /fixed_window/* {
		name fixed_window
		algorithm fixed_window
		limit 5 1h
		by query k
		max_keys 1000
	}
	rate_limit /sliding_log/* {
		name sliding_log
		algorithm sliding_log
		limit 5 1h
		by query k
		max_keys 1000
	}
	rate_limit /token_bucket/* {
		name token_bucket
		algorithm token_bucket
		limit 5 1h
		by query k
		max_keys 1000
	}
	rate_limit /leaky_bucket/* {
		name leaky_bucket
		algorithm leaky_bucket
		limit 5 1h
		by query k
		max_keys 1000
	}
	respond "ok"
}
`

// TestSpentKeyOutlivesJunkKeys: a client spends its key, then sends 3,000
// requests each with a new key value, so that its own is evicted and comes
// back whole. Its key stays spent, on every algorithm; the rule held at
// most max_keys keys, evicted only keys under their limit, and says so.
func TestSpentKeyOutlivesJunkKeys(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, junkCaddyfile)
	for algo, passes := range map[string]int{"sliding_window": 5, "fixed_window": 5, "sliding_log": 5, "token_bucket": 5, "leaky_bucket": 1} {
		path := "/" + algo + "/x?k="
		wantStatuses(t, algo+": spending", p.statuses(t, passes+1, path+"mine"), seq(passes, 200, 1, 429))
		var failed atomic.Int64
		fl := startFlood(3000, 8, func(i int64) {
			code, _, err := p.rawGet(context.Background(), fmt.Sprintf("%sjunk-%d", path, i))
			if err != nil || code != http.StatusOK {
				failed.Add(1)
			}
		})
		fl.wait()
		if failed.Load() != 0 {
			t.Errorf("%s: %d junk requests not answered 200", algo, failed.Load())
		}
		wantStatuses(t, algo+": after 3,000 junk keys", p.statuses(t, 2, path+"mine"), seq(0, 0, 2, 429))
		var r adminRule
		p.adminJSON(t, "/rate_limit/rules/"+algo, &r)
		if r.Keys > 1000 || r.Evictions < 2000 || r.EvictionsLimited != 0 {
			t.Errorf("%s: %d keys, %d evicted, %d of them at their limit; want at most 1000, at least 2000, 0", algo, r.Keys, r.Evictions, r.EvictionsLimited)
		}
	}
	_, body := p.admin(t, http.MethodGet, "/metrics", "")
	if v := metricValue(t, body, `caddy_rate_limit_evictions_total{rule="sliding_window",state="limited"}`); v != "0" {
		t.Errorf("evictions of limited keys: %s, want 0", v)
	}
}

// doubledCaddyfile keys /h/ by a header, /q/ by a query parameter and /c/
// by a cookie, 3 an hour, falling back to the client address; /d/ denies
// a request without a key.
const doubledCaddyfile = plainGlobals + `
:{{.HTTP}} {
	rate_limit /h/* {
		limit 3 1h
		by header X-API-Key
		on_missing_key ip
	}
	rate_limit /q/* {
		limit 3 1h
		by query k
		on_missing_key ip
	}
	rate_limit /c/* {
		limit 3 1h
		by cookie sid
		on_missing_key ip
	}
	rate_limit /p/* {
		limit 3 1h
		by {http.request.header.X-API-Key}
		on_missing_key ip
	}
	rate_limit /d/* {
		limit 3 1h
		by header X-API-Key
		on_missing_key deny
	}
	respond "ok"
}
`

// TestDoubledKeySource: a client sends its key source twice, a new first
// value every time and the same second one (which the backend may read).
// It gets no fresh bucket: a source with several values is missing, so
// on_missing_key decides.
func TestDoubledKeySource(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, doubledCaddyfile)
	for _, tc := range []struct {
		path    string
		headers func(i int) []string
		want    []int
	}{
		{"/h/x", func(i int) []string { return []string{"X-API-Key", fmt.Sprint("r", i), "X-API-Key", "victim"} }, seq(3, 200, 7, 429)},
		{"/p/x", func(i int) []string { return []string{"X-API-Key", fmt.Sprint("r", i), "X-API-Key", "victim"} }, seq(3, 200, 7, 429)},
		{"/c/x", func(i int) []string { return []string{"Cookie", fmt.Sprintf("sid=r%d; sid=victim", i)} }, seq(3, 200, 7, 429)},
		{"/c/x", func(i int) []string { return []string{"Cookie", fmt.Sprintf("sid=r%d", i), "Cookie", "sid=victim"} }, seq(0, 0, 10, 429)},
		{"/d/x", func(i int) []string { return []string{"X-API-Key", fmt.Sprint("r", i), "X-API-Key", "victim"} }, seq(0, 0, 10, 403)},
	} {
		var got []int
		for i := range 10 {
			got = append(got, p.status(t, tc.path, tc.headers(i)...))
		}
		wantStatuses(t, tc.path+" "+strings.Join(tc.headers(0), " "), got, tc.want)
	}
	var got []int
	for i := range 10 {
		got = append(got, p.status(t, fmt.Sprintf("/q/x?k=r%d&k=victim", i)))
	}
	wantStatuses(t, "/q/x?k=rN&k=victim", got, seq(3, 200, 7, 429))
	// one value is a key as before
	wantStatuses(t, "one header", p.statuses(t, 4, "/h/x", "X-API-Key", "mine"), seq(3, 200, 1, 429))
}

// TestForgedTokenWithoutKid: with a JWKS of 40 keys, each with a kid,
// forged tokens without a kid were checked against every key (served at
// 1/7 the rate of forged tokens with one). Now they are checked with none:
// refused as unknown_key, never a signature check.
func TestForgedTokenWithoutKid(t *testing.T) {
	t.Parallel()
	needCaddy(t)
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Y   string `json:"y"`
		Kid string `json:"kid"`
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	var first *ecdsa.PrivateKey
	for i := range 40 {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = key
		}
		pub, err := key.PublicKey.ECDH()
		if err != nil {
			t.Fatal(err)
		}
		b := pub.Bytes() // 0x04, X, Y
		set.Keys = append(set.Keys, jwk{"EC", "P-256", base64.RawURLEncoding.EncodeToString(b[1:33]), base64.RawURLEncoding.EncodeToString(b[33:]), fmt.Sprint("k", i)})
	}
	raw, _ := json.Marshal(set)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startCaddy(t, `{
	{{.Global}}
	rate_limit {
		jwt {
			jwks_file `+file+`
			algorithms ES256
		}
	}
}
:{{.HTTP}} {
	rate_limit {
		limit 1000 1h
		by jwt sub
		on_missing_key ip
	}
	respond "ok"
}
`)
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(key *ecdsa.PrivateKey, kid string, sub string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
		if kid != "" {
			tok.Header["kid"] = kid
		}
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for i := range 20 {
		p.status(t, "/", bearer(sign(forger, "", fmt.Sprint("forged-", i)))...)
	}
	for i := range 5 {
		p.status(t, "/", bearer(sign(forger, "k7", fmt.Sprint("forged-kid-", i)))...)
	}
	p.status(t, "/", bearer(sign(first, "k0", "real"))...)
	_, body := p.admin(t, http.MethodGet, "/metrics", "")
	for sample, want := range map[string]string{
		`caddy_rate_limit_jwt_failures_total{reason="unknown_key"}`: "20", // no kid: no key to check with
		`caddy_rate_limit_jwt_failures_total{reason="signature"}`:   "5",  // kid k7: one check each
	} {
		if got := metricValue(t, body, sample); got != want {
			t.Errorf("%s = %s, want %s", sample, got, want)
		}
	}
}

// TestSpoofedForwardedFor: behind exempt.Caddyfile's trusted proxies, a
// client that writes an exempt address first in X-Forwarded-For is not
// exempt (it was: 10 of 10 passed); the address a trusted proxy appended
// is the client's. A server that trusts proxies without
// trusted_proxies_strict warns, once a rule, at load.
func TestSpoofedForwardedFor(t *testing.T) {
	t.Parallel()
	p := startExample(t, "exempt.Caddyfile")
	wantStatuses(t, "spoofed", p.statuses(t, 10, "/", "X-Forwarded-For", "203.0.113.10, 198.51.100.7"), seq(2, 200, 8, 429))

	lax := startCaddy(t, `{
	{{.Global}}
	servers {
		trusted_proxies static private_ranges
	}
}
:{{.HTTP}} {
	rate_limit /ip/* {
		name by_ip
		limit 2 1m
	}
	rate_limit /key/* {
		name by_key
		limit 2 1m
		by header X-API-Key
	}
	rate_limit /exempt/* {
		name exempting
		limit 2 1m
		by header X-API-Key
		exempt 10.0.0.0/8
	}
	respond "ok"
}
`)
	const warning = "set trusted_proxies_strict in the server's options"
	lax.waitLog(warning)
	log := lax.log()
	for rule, want := range map[string]int{"by_ip": 1, "by_key": 0, "exempting": 1} {
		n := 0
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, warning) && strings.Contains(line, `"rule":"`+rule+`"`) {
				n++
			}
		}
		if n != want {
			t.Errorf("rule %s: %d warnings, want %d", rule, n, want)
		}
	}
	if strings.Contains(p.log(), warning) {
		t.Error("exempt.Caddyfile, which sets trusted_proxies_strict, warns")
	}
}

// TestFootgunsFailValidate: what passed `caddy validate` and turned a
// rule off, burnt a core or denied every request forever now fails it,
// naming the line (or, in JSON, the rule).
func TestFootgunsFailValidate(t *testing.T) {
	t.Parallel()
	needCaddy(t)
	dir := t.TempDir()
	site := func(lines string) string {
		return ":8080 {\n\trate_limit {\n\t\tname r\n" + lines + "\t}\n\trespond \"ok\"\n}\n"
	}
	for _, c := range []struct{ name, adapter, config, want string }{
		{"sweep_interval 1ns", "caddyfile", "{\n\trate_limit {\n\t\tsweep_interval 1ns\n\t}\n}\n" + site("\t\tlimit 5 1m\n"),
			"sweep_interval 1ns: must be at least 1s (each sweep visits every key), at CONFIG:3"},
		{"cost 0", "caddyfile", site("\t\tlimit 5 1m\n\t\tcost 0\n"),
			`cost "0": want a whole number ≥ 1 or a {placeholder}, at CONFIG:5`},
		{"cost above a limit", "caddyfile", site("\t\tlimit 10 1s\n\t\tlimit 10000 1d\n\t\tcost 20\n"),
			"cost 20 is more than limit 10 1s allows: every request would be denied, at CONFIG:6"},
		{"two limits, one window", "caddyfile", site("\t\tlimit 10 1m\n\t\tlimit 20 60s\n"),
			"limit 10 1m0s and limit 20 1m0s have the same window: keep the smaller, at CONFIG:5"},
		{"max_held without leaky_bucket", "caddyfile", site("\t\tlimit 10 1m\n\t\tmax_held 5\n"),
			"max_held applies to leaky_bucket only (no other algorithm holds requests), at CONFIG:5"},
		{"cost 0 in JSON", "json", jsonRule(`"cost":"0"`), "cost 0: a request must take at least 1 unit"},
		{"sweep_interval 1ns in JSON", "json", strings.Replace(jsonRule(""), `"rate_limit":{}`, `"rate_limit":{"sweep_interval":1}`, 1),
			"sweep_interval 1ns: must be at least 1s"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+"."+c.adapter)
		if err := os.WriteFile(file, []byte(c.config), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(caddyBin, "validate", "--config", file, "--adapter", c.adapter)
		if c.adapter == "json" {
			cmd = exec.Command(caddyBin, "validate", "--config", file)
		}
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
		out, err := cmd.CombinedOutput()
		want := strings.ReplaceAll(c.want, "CONFIG", file)
		if err == nil {
			t.Errorf("%s: caddy validate passed; want it to fail with %q", c.name, want)
		} else if !strings.Contains(strings.ReplaceAll(string(out), `\"`, `"`), want) {
			t.Errorf("%s: caddy validate said:\n%s\nwant it to contain %q", c.name, out, want)
		}
	}
}

// jsonRule is a JSON config with one rate_limit rule of 5 a minute, with
// extra fields.
func jsonRule(extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"apps":{"rate_limit":{},"http":{"servers":{"s":{"listen":[":8080"],"routes":[{"handle":[` +
		`{"handler":"rate_limit","rules":[{"name":"r","limits":[{"count":5,"window":60000000000}]` + extra + `}]},` +
		`{"handler":"static_response","body":"ok"}]}]}}}}}`
}

// TestMaxHeld: a leaky bucket held thousands of requests over many keys,
// without bound (6,200 held for 30 s took RSS from 56 to 292 MB). With
// max_held 3, three requests are held and the rest are refused at once;
// the gauge counts the held ones, and goes back to 0 when they leave.
func TestMaxHeld(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		name held
		algorithm leaky_bucket
		limit 1 1m
		burst 10
		max_delay 5m
		max_held 3
		by header X-Key
	}
	respond "ok"
}
`)
	for i := range 8 { // each key's first request passes at once
		wantStatuses(t, "first", p.statuses(t, 1, "/", "X-Key", fmt.Sprint("k", i)), seq(1, 200, 0, 0))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan int, 8)
	for i := range 8 { // each key's second would wait a minute
		go func() {
			code, _, err := p.rawGet(ctx, "/", "X-Key", fmt.Sprint("k", i))
			if err != nil {
				code = -1 // left while held
			}
			results <- code
		}()
	}
	refused := 0
	for range 5 {
		select {
		case code := <-results:
			if code != http.StatusTooManyRequests {
				t.Fatalf("a request answered %d while others are held; want 429", code)
			}
			refused++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 5 requests refused at once", refused)
		}
	}
	held := func() string {
		_, body := p.admin(t, http.MethodGet, "/metrics", "")
		return metricValue(t, body, `caddy_rate_limit_held{rule="held"}`)
	}
	if got := held(); got != "3" {
		t.Errorf("held gauge %s, want 3", got)
	}
	cancel() // the held clients leave
	for range 3 {
		if code := <-results; code != -1 {
			t.Errorf("a held request answered %d; want the client gone", code)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for held() != "0" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // Caddy sees the clients go
	}
	if got := held(); got != "0" {
		t.Errorf("held gauge %s after the clients left, want 0", got)
	}
	// the places are free again, and a new key passes as ever
	wantStatuses(t, "a new key", p.statuses(t, 1, "/", "X-Key", "new"), seq(1, 200, 0, 0))
}
