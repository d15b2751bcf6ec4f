package adapt

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseAbuseSubdirectives(t *testing.T) {
	h, err := parseTest("rate_limit {\n limit 5 1m\n block_for 1m 10m 1h\n block_reset 12h\n count_status 401 403 5xx\n cost_header X-Tokens\n}", "example.com", "", map[string]bool{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(h.Rules[0])
	want := `"block_for":[60000000000,600000000000,3600000000000],"block_reset":43200000000000,"count_status":["401","403","5xx"],"cost_header":"X-Tokens"`
	if !strings.Contains(string(got), want) {
		t.Fatalf("got %s\nwant it to contain %s", got, want)
	}
	// inherited from the top of the block
	h, err = parseTest("rate_limit {\n limit 5 1m\n block_for 2s\n count_status 4xx\n rule a {\n  by header X-A\n }\n}", "example.com", "", map[string]bool{})
	if err != nil {
		t.Fatal(err)
	}
	if r := h.Rules[0]; len(r.BlockFor) != 1 || r.CountStatus[0] != "4xx" {
		t.Fatalf("rule did not inherit: %+v", r)
	}
}

func TestParseAbuseErrors(t *testing.T) {
	for i, tc := range []struct{ input, want string }{
		{"rate_limit {\n limit 10 1m\n block_for\n}", "block_for: want one or more durations, as in `block_for 1m 10m 1h`, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n block_for 0s\n}", "block_for 0s: each duration must be above 0 and at most 8784h0m0s, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n block_for 1m soon\n}", `block_for "soon": not a duration`},
		{"rate_limit {\n limit 10 1m\n block_for 1m\n block_reset 0s\n}", "block_reset 0s: must be positive, at Testfile:4"},
		{"rate_limit {\n limit 10 1m\n block_reset 1h\n}", "block_reset without block_for: there are no blocks to forget, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n count_status\n}", "count_status: want at least one status code (401) or class (4xx), at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n count_status 600\n}", `count_status "600": want a status code from 100 to 599 or a class from 1xx to 5xx, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n count_status 6xx\n}", `count_status "6xx"`},
		{"rate_limit {\n limit 10 1m\n count_status 99\n}", `count_status "99"`},
		{"rate_limit {\n limit 10 1m\n cost_header X Y\n}", "wrong argument count"},
		{"rate_limit {\n limit 10 1m\n cost_header X:Y\n}", `cost_header "X:Y": not a valid header name, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n algorithm leaky_bucket\n cost_header X-Tokens\n}", "cost_header takes units after the response: a leaky_bucket cannot hold a request for units it does not know yet; use token_bucket, at Testfile:4"},
		{"rate_limit {\n limit 10 1m\n count_status 401\n algorithm leaky_bucket\n}", "count_status takes units after the response: a leaky_bucket cannot hold a request for units it does not know yet; use token_bucket, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n block_for 1m\n block_for 2m\n}", "block_for already given on line 3, at Testfile:4"},
	} {
		_, err := parseTest(tc.input, "example.com", "", map[string]bool{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d: got %v, want an error containing %q", i, err, tc.want)
		}
	}
}
