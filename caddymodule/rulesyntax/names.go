package rulesyntax

import (
	"fmt"
	"strings"
)

// Namer names the rules that a config leaves unnamed, from where they are
// and what they key on, never from their limits, so that a reload that
// changes a limit keeps the counters: "<site> <matcher> by <source>+…".
type Namer struct {
	// Site is the site addresses, joined by "," (for a rules file, its
	// names' prefix); "" outside a site.
	Site string
	// Matcher is the matcher token the rules are under ("/api/*",
	// "@name"); "" or "*" for none.
	Matcher string
	// Taken are the names derived so far, shared by every block of one
	// adaptation: a name taken gets " #2", " #3"… Nil: a map of its own.
	Taken map[string]bool
}

// Derive names a rule keyed by the sources by (none: the client IP).
func (p *Namer) Derive(by []string) string {
	if p.Taken == nil {
		p.Taken = make(map[string]bool)
	}
	if len(by) == 0 {
		by = []string{"ip"}
	}
	var parts []string
	if p.Site != "" {
		parts = append(parts, p.Site)
	}
	if p.Matcher != "" && p.Matcher != "*" { // * matches all: the same as none
		parts = append(parts, p.Matcher)
	}
	parts = append(parts, "by", strings.Join(by, "+"))
	base := strings.NewReplacer(`"`, "", `\`, "").Replace(strings.Join(parts, " "))
	name := base
	for n := 2; p.Taken[name]; n++ {
		name = fmt.Sprintf("%s #%d", base, n)
	}
	p.Taken[name] = true
	return name
}
