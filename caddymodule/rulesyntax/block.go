package rulesyntax

import (
	"fmt"
	"slices"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Block is what one Caddyfile block gives: each subdirective at the line
// it was first given. It refuses a subdirective given twice unless
// Repeats lets it repeat, always in one form: "[<block>: ]<sub> already
// given on line N", at the line of the second. A rule's Spec, a zone, the
// global option and its jwt, cluster and store redis blocks read their
// subdirectives through one.
type Block struct {
	// Name is how errors name the block ("zone z", "cluster",
	// "store redis"); "" for a rule's subdirectives and the top of a
	// block, whose names need no prefix.
	Name string
	// Repeats reports whether subdirective sub may be given more than
	// once (Repeatable, Once). Nil: none may.
	Repeats func(sub string) bool
	// Set is the subdirectives given, each at its first line. A token
	// without a line stands for one given elsewhere (an earlier global
	// option): the error about it names no line.
	Set map[string]caddyfile.Token
}

// NewBlock is an empty block named name (see Block.Name) whose
// subdirectives repeat as repeats says.
func NewBlock(name string, repeats func(sub string) bool) Block {
	return Block{Name: name, Repeats: repeats, Set: make(map[string]caddyfile.Token)}
}

// Repeatable is a Block.Repeats under which the subdirectives subs may
// repeat and no other.
func Repeatable(subs ...string) func(sub string) bool {
	return func(sub string) bool { return slices.Contains(subs, sub) }
}

// Once is a Block.Repeats under which every subdirective but subs may
// repeat.
func Once(subs ...string) func(sub string) bool {
	return func(sub string) bool { return !slices.Contains(subs, sub) }
}

// Take records that the block gives sub at the token d is at (sub is
// d.Val() but for a subdirective read under another name, as
// caddy-ratelimit's jitter is read as retry_jitter). It is an error at
// d's line if sub was given before and may not repeat.
func (b *Block) Take(d *caddyfile.Dispenser, sub string) error {
	if first, given := b.Set[sub]; given && (b.Repeats == nil || !b.Repeats(sub)) {
		prefix, line := "", ""
		if b.Name != "" {
			prefix = b.Name + ": "
		}
		if first.Line > 0 {
			line = fmt.Sprintf(" on line %d", first.Line)
		}
		return d.Errf("%s%s already given%s", prefix, first.Text, line)
	}
	if _, given := b.Set[sub]; !given {
		b.Set[sub] = d.Token()
	}
	return nil
}

// Read reads the subdirectives of the block d is at (its opening line
// read), one at a time: each is taken (Take) and then given to parse, d
// at its name.
func (b *Block) Read(d *caddyfile.Dispenser, parse func(sub string) error) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if err := b.Take(d, sub); err != nil {
			return err
		}
		if err := parse(sub); err != nil {
			return err
		}
	}
	return nil
}

// Has reports whether the block gave subdirective.
func (b *Block) Has(subdirective string) bool {
	_, ok := b.Set[subdirective]
	return ok
}
