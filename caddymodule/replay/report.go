package replay

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule/replay/accesslog"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// TopDenied is how many of a rule's most denied keys a report lists.
const TopDenied = 10

// KeysDeniedTarget is the share of a rule's keys that the suggested limit
// (Rule.SuggestedLimit) may deny: 1%.
const KeysDeniedTarget = 0.01

// Report counts what a replay decided, by rule. It is the Observer of the
// replayed handlers.
type Report struct {
	Lines    int64 // lines read
	Skipped  int64 // lines that are not access-log requests
	Outside  int64 // requests outside --from/--to
	Requests int64 // requests replayed

	Log429    int64 // requests the log has a 429 for
	Replay429 int64 // requests the replay answered 429
	Both429   int64 // both

	rules  map[string]*ruleTally
	order  []string        // rule names, in config order
	hidden map[string]bool // headers the log redacted, seen so far
	now    int64           // the replayed request's start, Unix ns

	keys  map[string]*keyTallies // every rule's tallies of a key, by key
	free  []keyTallies           // made ahead, 256 at a time, given to new keys
	last  string                 // the key of the last decision, and its tallies:
	lastK *keyTallies            // a request's rules are mostly keyed alike
}

// ruleTally is one rule's counts.
type ruleTally struct {
	cfg      ruleconfig.Rule
	index    int32         // its place in Report.order
	window   time.Duration // the rule's shortest window
	limit    int64         // its count
	requests int64
	denied   int64
	keyless  int64
	keys     int // distinct keys
}

// keyTallies are one key's tallies in the rules that met it: the first
// rule's inline, the others' after it. One map of keys for all rules: a
// request's rules keyed alike (by client address, most often) find their
// tallies with one lookup.
type keyTallies struct {
	first keyTally
	more  []keyTally
}

// keyTally is one key's counts in a rule: its denials, and its peak units
// in the rule's shortest window, estimated as a sliding-window counter
// does (the previous window's units weighted by their overlap with the
// window ending now, plus the current window's): two counters a key, not a
// timestamp a request.
type keyTally struct {
	rule      int32 // the rule's index (ruleTally.index)
	denied    int64
	idx       int64 // the current window: start / window
	cur, prev int64 // units in the current and the previous window
	peak      int64
}

// tally is key's tally in rule t, made if new.
func (rep *Report) tally(t *ruleTally, key string) *keyTally {
	ks := rep.lastK
	if ks == nil || key != rep.last {
		if ks = rep.keys[key]; ks == nil {
			if len(rep.free) == 0 {
				rep.free = make([]keyTallies, 256)
			}
			ks, rep.free = &rep.free[0], rep.free[1:]
			ks.first.rule = t.index
			t.keys++
			// a key may be part of the string holding its line's
			// strings (accesslog): kept, it would keep all of them
			rep.keys[strings.Clone(key)] = ks
		}
		rep.last, rep.lastK = key, ks
	}
	if k := ks.of(t.index); k != nil {
		return k
	}
	t.keys++
	ks.more = append(ks.more, keyTally{rule: t.index})
	return &ks.more[len(ks.more)-1]
}

// of is the key's tally in the rule of that index; nil if none.
func (ks *keyTallies) of(rule int32) *keyTally {
	if ks.first.rule == rule {
		return &ks.first
	}
	for i := range ks.more {
		if ks.more[i].rule == rule {
			return &ks.more[i]
		}
	}
	return nil
}

func newReport() *Report {
	return &Report{rules: make(map[string]*ruleTally), hidden: make(map[string]bool), keys: make(map[string]*keyTallies)}
}

// addRules adds the rules of a handler; a name met again (rules sharing
// their counters) is one rule.
func (rep *Report) addRules(rules []ruleconfig.Rule) {
	for _, r := range rules {
		if _, ok := rep.rules[r.Name]; ok {
			continue
		}
		t := &ruleTally{cfg: r, index: int32(len(rep.order))}
		for _, l := range r.Limits {
			if w := time.Duration(l.Window); t.window == 0 || w < t.window {
				t.window, t.limit = w, l.Count
			}
		}
		rep.rules[r.Name] = t
		rep.order = append(rep.order, r.Name)
	}
}

// begin is called before e is served.
func (rep *Report) begin(e *accesslog.Entry) {
	rep.Requests++
	rep.now = e.Start.UnixNano()
	for _, h := range e.Hidden {
		rep.hidden[h] = true
	}
}

// served counts e's outcome: status is the replay's answer.
func (rep *Report) served(e *accesslog.Entry, status int) {
	log, replay := e.Status == http.StatusTooManyRequests, status == http.StatusTooManyRequests
	if log {
		rep.Log429++
	}
	if replay {
		rep.Replay429++
	}
	if log && replay {
		rep.Both429++
	}
}

// Decided counts a rule's decision (caddymodule.Observer).
func (rep *Report) Decided(rule, key string, cost int64, allowed bool) {
	t := rep.rules[rule]
	if t == nil {
		return
	}
	t.requests++
	k := rep.tally(t, key)
	if !allowed {
		t.denied++
		k.denied++
	}
	if w := t.window.Nanoseconds(); w > 0 {
		idx := rep.now / w
		switch {
		case idx == k.idx || k.idx == 0 && k.cur == 0:
			k.idx = max(k.idx, idx)
		case idx == k.idx+1:
			k.idx, k.prev, k.cur = idx, k.cur, 0
		case idx > k.idx:
			k.idx, k.prev, k.cur = idx, 0, 0
		}
		k.cur += cost
		// the part of the previous window still inside the window ending now
		left := float64(w-(rep.now-k.idx*w)) / float64(w)
		if idx < k.idx { // time went back: count it in the window it is in
			left = 0
		}
		k.peak = max(k.peak, k.cur+int64(math.Ceil(float64(k.prev)*left)))
	}
}

// Keyless counts a request a rule found no key in (caddymodule.Observer).
func (rep *Report) Keyless(rule string) {
	if t := rep.rules[rule]; t != nil {
		t.keyless++
	}
}

// Summary is the report as `--format json` prints it.
type Summary struct {
	Lines     int64  `json:"lines"`      // lines read
	Skipped   int64  `json:"skipped"`    // lines that are not access-log requests
	Outside   int64  `json:"outside"`    // requests outside --from/--to
	Requests  int64  `json:"requests"`   // requests replayed
	Log429    int64  `json:"log_429"`    // requests the log has a 429 for
	Replay429 int64  `json:"replay_429"` // requests the replay refused with a 429
	Both429   int64  `json:"both_429"`   // requests both refused
	Rules     []Rule `json:"rules"`
}

// Rule is one rule's part of the summary.
type Rule struct {
	Name          string     `json:"name"`
	Shadow        bool       `json:"shadow"`         // the rule only logs its denials
	Requests      int64      `json:"requests"`       // requests the rule decided
	Denied        int64      `json:"denied"`         // requests it denied (or would have: shadow)
	DeniedPercent float64    `json:"denied_percent"` // denied / requests × 100
	Keys          int        `json:"keys"`           // distinct keys
	DeniedKeys    int        `json:"denied_keys"`    // keys denied at least once
	TopDenied     []KeyCount `json:"top_denied"`     // the keys most denied, at most TopDenied

	WindowSeconds float64 `json:"window_seconds"` // the rule's shortest window
	Limit         int64   `json:"limit"`          // its count
	// Peak is the spread of each key's peak units in the shortest window.
	Peak Peaks `json:"peak"`
	// SuggestedLimit is the smallest limit of the shortest window that
	// would have denied at most 1% of the keys: every key whose peak is
	// above it (0 if the rule has no key).
	SuggestedLimit int64 `json:"suggested_limit"`

	// Redacted is true when the rule keys by a header the log redacted
	// (Authorization, Cookie: Caddy writes them as REDACTED unless the
	// server has log_credentials): such requests had no key in the
	// replay; WithoutKey counts the requests the rule found no key in.
	Redacted        bool     `json:"redacted"`
	RedactedHeaders []string `json:"redacted_headers,omitempty"`
	WithoutKey      int64    `json:"without_key"`
}

// KeyCount is a key and its denials.
type KeyCount struct {
	Key    string `json:"key"`
	Denied int64  `json:"denied"`
}

// Peaks are percentiles of the keys' peak units.
type Peaks struct {
	P50 int64 `json:"p50"`
	P99 int64 `json:"p99"`
	Max int64 `json:"max"`
}

// Summary sums the report up.
func (rep *Report) Summary() Summary {
	s := Summary{Lines: rep.Lines, Skipped: rep.Skipped, Outside: rep.Outside, Requests: rep.Requests,
		Log429: rep.Log429, Replay429: rep.Replay429, Both429: rep.Both429, Rules: []Rule{}}
	for _, name := range rep.order {
		s.Rules = append(s.Rules, rep.summary(rep.rules[name]))
	}
	return s
}

// summary sums rule t up.
func (rep *Report) summary(t *ruleTally) Rule {
	r := Rule{Name: t.cfg.Name, Shadow: t.cfg.Shadow, Requests: t.requests, Denied: t.denied,
		Keys: t.keys, TopDenied: []KeyCount{}, WindowSeconds: t.window.Seconds(), Limit: t.limit, WithoutKey: t.keyless}
	if t.requests > 0 {
		r.DeniedPercent = math.Round(float64(t.denied)/float64(t.requests)*1e4) / 100
	}
	peaks := make([]int64, 0, t.keys)
	for key, ks := range rep.keys {
		k := ks.of(t.index)
		if k == nil {
			continue
		}
		peaks = append(peaks, k.peak)
		if k.denied > 0 {
			r.DeniedKeys++
			r.TopDenied = append(r.TopDenied, KeyCount{Key: key, Denied: k.denied})
		}
	}
	slices.SortFunc(r.TopDenied, func(a, b KeyCount) int {
		if a.Denied != b.Denied {
			return int(b.Denied - a.Denied)
		}
		return strings.Compare(a.Key, b.Key)
	})
	r.TopDenied = r.TopDenied[:min(len(r.TopDenied), TopDenied)]
	slices.Sort(peaks)
	if n := len(peaks); n > 0 {
		r.Peak = Peaks{P50: peaks[(n-1)/2], P99: peaks[(n*99+99)/100-1], Max: peaks[n-1]}
		r.SuggestedLimit = peaks[n-1-int(float64(n)*KeysDeniedTarget)]
	}
	for _, h := range headersRead(t.cfg.By) {
		if rep.hidden[h] {
			r.Redacted = true
			r.RedactedHeaders = append(r.RedactedHeaders, h)
		}
	}
	return r
}

// headersRead are the request headers a rule's key sources read, those
// the access log may redact among them.
func headersRead(by []string) []string {
	var out []string
	add := func(h string) {
		if h = http.CanonicalHeaderKey(h); !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	for _, src := range by {
		f := strings.Fields(src)
		switch {
		case len(f) == 2 && f[0] == "header":
			add(f[1])
		case len(f) >= 1 && f[0] == "cookie":
			add("Cookie")
		case len(f) >= 1 && f[0] == "jwt": // a bearer token, or a token cookie
			add("Authorization")
			add("Cookie")
		}
		for rest := src; ; {
			i := strings.Index(rest, "{http.request.header.")
			if i < 0 {
				break
			}
			rest = rest[i+len("{http.request.header."):]
			if j := strings.IndexByte(rest, '}'); j > 0 {
				add(rest[:j])
			}
		}
		if strings.Contains(src, "{http.request.cookie.") {
			add("Cookie")
		}
	}
	return out
}
