package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// replayCaddyfile is a site with an access log, three rules (one keyed by
// the Authorization header, which the log redacts) and a reverse_proxy to
// a port nothing listens on: live, its allowed requests are 502s; the
// replay must not call it.
const replayCaddyfile = trustLoopback + `
:{{.HTTP}} {
	log {
		output file {{.Storage}}-access.log
	}
	rate_limit {
		rule tok {
			match {
				path /tok/*
			}
			limit 3 1m
			by header Authorization
		}
		rule api {
			match {
				path /api/*
			}
			limit 4 1m
		}
		rule all {
			limit 10 1m
		}
	}
	handle /api/* {
		reverse_proxy 127.0.0.1:1
	}
	respond "ok"
}
`

// replaySummary is what the test reads of `--format json`.
type replaySummary struct {
	Lines, Skipped, Requests   int
	Log429, Replay429, Both429 int `json:"-"`
	Rules                      []struct {
		Name                   string
		Requests, Denied, Keys int
		DeniedKeys             int `json:"denied_keys"`
		TopDenied              []struct {
			Key    string
			Denied int
		} `json:"top_denied"`
		Redacted        bool
		RedactedHeaders []string `json:"redacted_headers"`
		WithoutKey      int      `json:"without_key"`
		SuggestedLimit  int      `json:"suggested_limit"`
	}
}

// TestReplayPredictsLive runs a real Caddy with an access log, drives
// requests from four clients (some denied), stops it, and replays its
// access log against the same Caddyfile with the same binary: the
// replay's 429s are the live run's, request by request, and the rule keyed
// by Authorization is reported as redacted.
func TestReplayPredictsLive(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, replayCaddyfile)
	live := map[int]int{}
	n := 0
	// round robin over the clients, so that their requests interleave;
	// client c sends 3c requests to /api/ and 6 to /page, then two tokens
	// send 3 each to /tok/ (within their limit: the log cannot show them)
	for round := range 12 {
		for c := 1; c <= 4; c++ {
			ip := fmt.Sprintf("10.0.0.%d", c)
			if round < 3*c {
				live[p.status(t, "/api/a", xff(ip)...)]++
				n++
			}
			if round < 6 {
				live[p.status(t, "/page", xff(ip)...)]++
				n++
			}
		}
	}
	for i := range 6 {
		live[p.status(t, "/tok/x", "X-Forwarded-For", "10.0.0.9", "Authorization", fmt.Sprintf("Bearer k%d", i%2))]++
		n++
	}
	// api: 30 requests, 4 allowed a client (3 for client 1): 15 denied;
	// all: client 1 takes 9, 2 to 4 take 10 of their 10 and 14 requests
	// (4 to /api/ allowed, 6 to /page), client 9 takes 6: no denial
	if want := map[int]int{http.StatusBadGateway: 15, http.StatusTooManyRequests: 15, http.StatusOK: 24 + 6}; fmt.Sprint(live) != fmt.Sprint(want) {
		t.Fatalf("live statuses %v, want %v", live, want)
	}
	p.stop()
	logFile := p.data.Storage + "-access.log"
	before, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(before, []byte("\n")); lines != n {
		t.Fatalf("access log has %d lines, want %d", lines, n)
	}
	// junk a replay must count and pass over
	junk := filepath.Join(p.dir, "junk.log")
	os.WriteFile(junk, []byte("not json\n{\"level\":\"info\",\"ts\":1,\"msg\":\"serving\"}\n"), 0o644)

	out := runReplay(t, p, "--config", filepath.Join(p.dir, "Caddyfile"), "--log", logFile, "--log", junk, "--format", "json")
	var s replaySummary
	var raw map[string]any
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("replay output: %v\n%s", err, out)
	}
	json.Unmarshal(out, &raw)
	s.Log429, s.Replay429, s.Both429 = int(raw["log_429"].(float64)), int(raw["replay_429"].(float64)), int(raw["both_429"].(float64))
	agree := s.Requests - (s.Log429 - s.Both429) - (s.Replay429 - s.Both429)
	t.Logf("replay: %d of %d requests agree with the live run (%d live 429s, %d replayed)", agree, n, s.Log429, s.Replay429)
	if s.Lines != n+2 || s.Skipped != 2 || s.Requests != n {
		t.Errorf("lines %d skipped %d requests %d, want %d, 2, %d", s.Lines, s.Skipped, s.Requests, n+2, n)
	}
	if agree != n || s.Log429 != 15 || s.Replay429 != 15 {
		t.Errorf("replay agrees on %d of %d requests (log 429s %d, replay %d, both %d), want all", agree, n, s.Log429, s.Replay429, s.Both429)
	}
	byName := map[string]int{}
	for i, r := range s.Rules {
		byName[r.Name] = i
	}
	api, tok := s.Rules[byName["api"]], s.Rules[byName["tok"]]
	if api.Requests != 30 || api.Denied != 15 || api.Keys != 4 || api.DeniedKeys != 3 ||
		len(api.TopDenied) != 3 || api.TopDenied[0].Key != "10.0.0.4" || api.TopDenied[0].Denied != 8 {
		t.Errorf("rule api: %+v, want 30 requests, 15 denied, 4 keys, 3 denied, 10.0.0.4 most (8)", api)
	}
	// each key's peak is its demand in the minute: 3, 6, 9, 12 → 12 denies
	// none (1% of 4 keys is none)
	if api.SuggestedLimit != 12 {
		t.Errorf("rule api: suggested limit %d, want 12", api.SuggestedLimit)
	}
	if !tok.Redacted || fmt.Sprint(tok.RedactedHeaders) != "[Authorization]" || tok.WithoutKey != 6 || tok.Requests != 0 {
		t.Errorf("rule tok: redacted %t %v, without a key %d, requests %d; want true [Authorization] 6 0", tok.Redacted, tok.RedactedHeaders, tok.WithoutKey, tok.Requests)
	}
	after, _ := os.ReadFile(logFile)
	if !bytes.Equal(before, after) {
		t.Errorf("the replay wrote to the access log it read")
	}

	text := string(runReplay(t, p, "--config", filepath.Join(p.dir, "Caddyfile"), "--log", logFile))
	for _, want := range []string{"rule api: limit 4 per 1m0s", "would deny 15 (50.00%), keys denied 3", "keyed by Authorization, which the log redacts: 6 requests without a key"} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
}

// runReplay runs `caddy rate-limit replay` with args in p's directory and
// environment, and returns its stdout.
func runReplay(t *testing.T, p *caddyProc, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(caddyBin, append([]string{"rate-limit", "replay"}, args...)...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "HOME="+p.dir, "XDG_CONFIG_HOME="+filepath.Join(p.dir, "config"), "XDG_DATA_HOME="+filepath.Join(p.dir, "data"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("caddy rate-limit replay: %v\n%s", err, stderr.String())
	}
	return out
}

// replayMatchersSite is a site whose rules are reached through matchers of
// every part of a request a replay rebuilds: a header, the client address,
// the host, the query, the method, the path (a regexp, whose capture keys
// a rule), a var set by a handler, and a handle group. Each rule allows 2
// a minute (m-net 3), by client address unless told. m-recap keys by the
// capture of m-re's matcher: on /item/ABC, which m-re's does not match,
// the placeholder is unknown and stays as written (one more key).
const replayMatchersSite = `
:{{.HTTP}} {
	log {
		output file {{.Storage}}-access.log
	}
	@team header X-Team blue
	@net client_ip 10.1.0.0/16
	@api host api.example.com
	@page query page=2
	@post method POST
	@v path /v/*
	@re path_regexp item ^/item/([a-z]+)$
	vars @v tier gold
	rate_limit @team {
		name m-team
		limit 2 1m
	}
	rate_limit @net {
		name m-net
		limit 3 1m
	}
	rate_limit @api {
		name m-host
		limit 2 1m
	}
	rate_limit @page {
		name m-query
		limit 2 1m
	}
	rate_limit @post {
		name m-method
		limit 2 1m
	}
	rate_limit {
		name m-tier
		by {http.vars.tier}
		limit 2 1m
	}
	rate_limit @re {
		name m-re
		by {re.item.1}
		limit 2 1m
	}
	rate_limit {
		name m-recap
		by {re.item.1}
		match {
			path /item/*
		}
		limit 2 1m
	}
	handle /g/* {
		rate_limit {
			name m-g
			limit 2 1m
		}
		respond "g"
	}
	handle {
		respond "ok"
	}
}
`

// TestReplayPredictsLiveMatchers drives requests that each reach one
// rule through its matcher, interleaved, to a real Caddy, then replays its
// access log: every 429 is predicted, and each rule decided exactly the
// requests its matcher let through. With trusted_proxies (clients named
// by X-Forwarded-For, Caddy's own code finding them) and without (every
// client the peer, 127.0.0.1: m-net never matches). A var, a regexp's
// capture or a route group of one line seen by the next would change a
// rule's counts or a 429 (m-tier, m-recap, m-g).
func TestReplayPredictsLiveMatchers(t *testing.T) {
	t.Parallel()
	// n requests of a kind, from client (X-Forwarded-For)
	groups := []struct {
		n                    int
		method, path, client string
		headers              []string
	}{
		{3, "GET", "/t", "10.9.0.1", []string{"X-Team", "blue"}},
		{4, "GET", "/n", "10.1.0.5", nil},
		{3, "GET", "/h", "10.9.0.2", []string{"Host", "api.example.com"}},
		{3, "GET", "/q?page=2", "10.9.0.3", nil},
		{2, "GET", "/q?page=3", "10.9.0.3", nil},
		{3, "POST", "/p", "10.9.0.4", nil},
		{3, "GET", "/v/x", "10.9.0.5", nil},
		{3, "GET", "/item/abc", "10.9.0.6", nil},
		{1, "GET", "/item/ABC", "10.9.0.6", nil},
		{3, "GET", "/g/1", "10.9.0.7", nil},
	}
	for _, tc := range []struct {
		name, global string
		want         map[string][2]int // rule → requests, denied
		live429      int
	}{
		{"trusted", trustLoopback, map[string][2]int{"m-team": {3, 1}, "m-net": {4, 1}, "m-host": {3, 1}, "m-query": {3, 1},
			"m-method": {3, 1}, "m-tier": {3, 1}, "m-re": {3, 1}, "m-recap": {3, 0}, "m-g": {3, 1}}, 8},
		{"peer", "{\n\t{{.Global}}\n}\n", map[string][2]int{"m-team": {3, 1}, "m-net": {0, 0}, "m-host": {3, 1}, "m-query": {3, 1},
			"m-method": {3, 1}, "m-tier": {3, 1}, "m-re": {3, 1}, "m-recap": {3, 0}, "m-g": {3, 1}}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startCaddy(t, tc.global+replayMatchersSite)
			live, n := 0, 0
			for round := range 4 {
				for _, g := range groups {
					if round >= g.n {
						continue
					}
					req, err := http.NewRequest(g.method, p.url(g.path), nil)
					if err != nil {
						t.Fatal(err)
					}
					addHeaders(req, append(xff(g.client), g.headers...))
					resp, err := p.send(t, req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						live++
					}
					n++
				}
			}
			if live != tc.live429 {
				t.Fatalf("live: %d 429s of %d, want %d", live, n, tc.live429)
			}
			p.stop()
			out := runReplay(t, p, "--config", filepath.Join(p.dir, "Caddyfile"), "--log", p.data.Storage+"-access.log", "--format", "json")
			var s replaySummary
			var raw map[string]any
			if err := json.Unmarshal(out, &s); err != nil {
				t.Fatalf("replay output: %v\n%s", err, out)
			}
			json.Unmarshal(out, &raw)
			log429, replay429, both := int(raw["log_429"].(float64)), int(raw["replay_429"].(float64)), int(raw["both_429"].(float64))
			if s.Requests != n || log429 != live || replay429 != live || both != live {
				t.Errorf("replayed %d of %d requests: 429s in the log %d, in the replay %d, in both %d; want %d each", s.Requests, n, log429, replay429, both, live)
			}
			got := map[string][2]int{}
			for _, r := range s.Rules {
				got[r.Name] = [2]int{r.Requests, r.Denied}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("rules (requests, denied):\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}
