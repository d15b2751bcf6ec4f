package integration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// TestHandleErrorsPage checks that a denial is an error handle_errors can
// render, with the rate_limit placeholders, and that Retry-After survives.
func TestHandleErrorsPage(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		name page
		limit 1 30d
		algorithm sliding_log
	}
	respond "ok"
	handle_errors 429 {
		respond "slow down {http.rate_limit.rule} {http.rate_limit.retry_after}" 429
	}
}
`)
	if code, _, body := p.get(t, "/"); code != 200 || body != "ok" {
		t.Fatalf("first request: %d %q, want 200 \"ok\"", code, body)
	}
	code, h, body := p.get(t, "/")
	if code != 429 {
		t.Errorf("second request: status %d, want 429", code)
	}
	// The sliding log frees the one request 30 days after it was taken.
	retry := strconv.Itoa(thirtyDays)
	if want := "slow down page " + retry; body != want {
		t.Errorf("second request: body %q, want %q", body, want)
	}
	if got := h.Get("Retry-After"); got != retry {
		t.Errorf("second request: Retry-After %q, want %s", got, retry)
	}
}

// TestHandleErrorsKeyPlaceholder checks {http.rate_limit.key}.
func TestHandleErrorsKeyPlaceholder(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		name keyed
		limit 1 30d
		by header X-API-Key
		on_missing_key ip
	}
	respond "ok"
	handle_errors {
		respond "{err.status_code} for {http.rate_limit.key}"
	}
}
`)
	p.status(t, "/", "X-API-Key", "k-123")
	code, _, body := p.get(t, "/", "X-API-Key", "k-123")
	if code != 429 || body != "429 for k-123" {
		t.Errorf("second request: %d %q, want 429 \"429 for k-123\"", code, body)
	}
	// without the header: keyed by the client's address, shown as it is
	p.status(t, "/")
	if code, _, body := p.get(t, "/"); code != 429 || body != "429 for 127.0.0.1" {
		t.Errorf("fallback key: %d %q, want 429 \"429 for 127.0.0.1\"", code, body)
	}
}

// TestProblemJSON checks the RFC 9457 body of problem_json.
func TestProblemJSON(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit /single {
		name quota
		limit 1 30d
		algorithm sliding_log
		problem_json
	}
	rate_limit /multi {
		name multi
		limit 1 1h
		limit 10 1d
		algorithm sliding_log
		problem_json
	}
	respond "ok"
}
`)
	for i, tc := range []struct {
		path     string
		policies []string
	}{
		{"/single", []string{"quota"}},
		{"/multi", []string{"multi-1h"}}, // only the limit that had no room
	} {
		what := fmt.Sprintf("Test %d: %s", i, tc.path)
		if code := p.status(t, tc.path); code != 200 {
			t.Errorf("%s: first request: status %d, want 200", what, code)
		}
		code, h, body := p.get(t, tc.path)
		if code != 429 {
			t.Errorf("%s: status %d, want 429", what, code)
		}
		if ct := h.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
		}
		wantRetryAfter(t, what, h, thirtyDays)
		var prob struct {
			Type             string   `json:"type"`
			Title            string   `json:"title"`
			Status           int      `json:"status"`
			ViolatedPolicies []string `json:"violated-policies"`
		}
		if err := json.Unmarshal([]byte(body), &prob); err != nil {
			t.Errorf("%s: body %q: %v", what, body, err)
			continue
		}
		if prob.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" {
			t.Errorf("%s: type %q", what, prob.Type)
		}
		if prob.Status != 429 {
			t.Errorf("%s: status in body %d, want 429", what, prob.Status)
		}
		if prob.Title == "" {
			t.Errorf("%s: no title", what)
		}
		if fmt.Sprint(prob.ViolatedPolicies) != fmt.Sprint(tc.policies) {
			t.Errorf("%s: violated-policies %q, want %q", what, prob.ViolatedPolicies, tc.policies)
		}
	}
}
