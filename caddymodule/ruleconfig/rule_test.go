package ruleconfig

import "testing"

// TestCheckWord: each field of words takes its words and nothing else, ""
// included, in the wording that the Caddyfile, the rules file and JSON
// all show.
func TestCheckWord(t *testing.T) {
	for i, tc := range []struct {
		field, value, err string
	}{
		{"on_missing_key", "deny", ""},
		{"on_missing_key", "drop", `on_missing_key "drop": want skip, ip or deny`},
		{"headers", "both", ""},
		{"headers", "", `headers "": want ietf, legacy, both or off`},
		{"scope", "node", ""},
		{"scope", "global", `scope "global": want cluster or node`},
		{"key_hash", "sha256", ""},
		{"key_hash", "md5", `key_hash "md5": want sha256`},
		{"store", "redis", ""},
		{"store", "disk", `store "disk": want local or redis`},
		{"on_store_error", "fail_closed", ""},
		{"on_store_error", "ignore", `on_store_error "ignore": want local, fail_open or fail_closed`},
	} {
		err := CheckWord(tc.field, tc.value)
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.err {
				t.Errorf("Test %d: CheckWord(%q, %q) = %q, want %q", i, tc.field, tc.value, got, tc.err)
			}
		} else if tc.err != "" {
			t.Errorf("Test %d: CheckWord(%q, %q) passed, want %q", i, tc.field, tc.value, tc.err)
		}
	}
	r := Rule{Name: "r", Limits: []Limit{{Count: 1, Window: 1e9}}, Headers: "loud"}
	if err := r.CheckFields(); err == nil || err.Error() != `headers "loud": want ietf, legacy, both or off` {
		t.Errorf("CheckFields: %v, want CheckWord's error", err)
	}
}
