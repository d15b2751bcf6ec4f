package rulesyntax

import (
	"math"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// parseBy reads the sources of one `by` line: `by header X-API-Key user_id`
// is "header X-API-Key" and "user_id".
func parseBy(d *caddyfile.Dispenser, check func(string) error) ([]string, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.ArgErr()
	}
	var words []string
	for i := 0; i < len(args); i++ {
		word := args[i]
		if keyArgSources[word] {
			if i+1 == len(args) {
				return nil, d.Errf("by %s: want a name, as in `by %s NAME`", word, word)
			}
			i++
			word += " " + args[i]
		}
		if check != nil {
			if err := check(word); err != nil {
				return nil, d.Errf("%v", err)
			}
		}
		words = append(words, word)
	}
	return words, nil
}

// parseJitter reads retry_jitter (or caddy-ratelimit's jitter) into r.
func parseJitter(d *caddyfile.Dispenser, r *ruleconfig.Rule) error {
	sub := d.Val()
	var arg string
	if err := OneArg(d, &arg); err != nil {
		return err
	}
	f, err := strconv.ParseFloat(arg, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 10 {
		return d.Errf("%s %s: want a fraction of the wait from 0 to 10 (0.2 adds up to 20%%)", sub, arg)
	}
	r.RetryJitter = f
	return nil
}

// OneArg reads the subdirective's single argument into dst.
func OneArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.AllArgs(dst) {
		return d.ArgErr()
	}
	return nil
}

// wordArg reads the one argument of subdirective sub, one of the words
// ruleconfig.CheckWord allows for the field of that name, into dst.
func wordArg(d *caddyfile.Dispenser, sub string, dst *string) error {
	if err := OneArg(d, dst); err != nil {
		return err
	}
	if err := ruleconfig.CheckWord(sub, *dst); err != nil {
		return d.Errf("%v", err)
	}
	return nil
}

// PrefixArg reads the prefix length of ipv4_prefix or ipv6_prefix: 1 to
// most bits.
func PrefixArg(d *caddyfile.Dispenser, sub string, most int) (int, error) {
	var arg string
	if err := OneArg(d, &arg); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > most {
		return 0, d.Errf("%s %s: must be a whole number from 1 to %d", sub, arg, most)
	}
	return n, nil
}

// FlagArg sets a subdirective that takes no argument.
func FlagArg(d *caddyfile.Dispenser, dst *bool) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	*dst = true
	return nil
}

// CountArg reads the one argument of the subdirective d is at, a whole
// number of at least 1, into n.
func CountArg(d *caddyfile.Dispenser, n *int) error {
	sub := d.Val()
	var arg string
	if err := OneArg(d, &arg); err != nil {
		return err
	}
	v, err := strconv.Atoi(arg)
	if err != nil || v < 1 {
		return d.Errf("%s %s: must be a whole number of at least 1", sub, arg)
	}
	*n = v
	return nil
}

// IntervalArg reads the one argument of subdirective `what`: a duration
// greater than zero.
func IntervalArg(d *caddyfile.Dispenser, what string) (time.Duration, error) {
	var arg string
	if err := OneArg(d, &arg); err != nil {
		return 0, err
	}
	every, err := DurationArg(d, what, arg)
	if err != nil {
		return 0, err
	}
	if every <= 0 {
		return 0, d.Errf("%s %s: must be positive", what, arg)
	}
	return every, nil
}

// DurationArg reads a Caddy duration ("1m", "1d"), naming what it is in
// the error.
func DurationArg(d *caddyfile.Dispenser, what, s string) (time.Duration, error) {
	dur, err := caddy.ParseDuration(s)
	if err == nil && dur < 0 {
		return 0, d.Errf("%s %s: must not be negative", what, s)
	}
	if err != nil {
		return 0, d.Errf("%s %q: not a duration (such as 500ms, 1m or 1d)", what, s)
	}
	return dur, nil
}
