package caddymodule

import (
	"encoding/json"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler applies rate-limit rules to requests: a request that a rule
// denies gets a 429 (an error that handle_errors can render), with
// Retry-After; others pass to the next handler, with the rules' headers.
//
// Rules within one handler, and across several rate_limit handlers on one
// request, are all-or-nothing: a request denied by one rule takes nothing
// from the others.
type Handler struct {
	// Rules are the rate limits applied to every request reaching the
	// handler (each narrowed by its own match). At least one.
	Rules []Rule `json:"rules,omitempty"`

	// RulesFile is the path of a file of rules in the EdgeByte YAML format
	// (a rate_limit: list of rules, each with path:, limit:, window:, by:
	// and any other subdirective as a field). It is read when the config
	// loads, on every load: its rules are added to Rules. A missing file,
	// bad YAML, an unknown field or a bad value fails the load with the
	// file and line. Global placeholders such as {env.RULES} are replaced.
	// Default: none.
	RulesFile string `json:"rules_file,omitempty"`

	// RulesFileNames prefixes the names derived for the rules of RulesFile
	// that have no name: "<prefix> <file name> <path> by <key>". The
	// Caddyfile adapter sets the site's addresses, so that two sites
	// reading one file keep separate counters. Default: none, and the
	// file's whole path stands for the file name.
	RulesFileNames string `json:"rules_file_names,omitempty"`

	// SweepInterval is accepted for compatibility with
	// mholt/caddy-ratelimit; idle keys are swept by the rate_limit app.
	SweepInterval caddy.Duration `json:"sweep_interval,omitempty"`

	// The fields below are mholt/caddy-ratelimit's, so that its JSON
	// handler configs load unchanged (see docs/caddy-ratelimit.md).

	// RateLimits are caddy-ratelimit's zones by name; each becomes a rule
	// of that name (algorithm sliding_log), after Rules, in name order.
	// Default: none.
	RateLimits map[string]*Zone `json:"rate_limits,omitempty"`

	// Jitter is the retry_jitter of every rule that sets none: up to this
	// fraction of the wait is added to Retry-After. Default: 0.
	Jitter float64 `json:"jitter,omitempty"`

	// LogKey sets log_key on every rule: keys are written in denial log
	// lines. Default: off.
	LogKey bool `json:"log_key,omitempty"`

	// DisableMetrics sets disable_metrics on every rule: none of their
	// series is exported. Default: off.
	DisableMetrics bool `json:"disable_metrics,omitempty"`

	// Distributed is caddy-ratelimit's distributed rate limiting through
	// storage: accepted and ignored, with a warning (use the rate_limit
	// app's cluster block, or store redis). Default: none.
	Distributed json.RawMessage `json:"distributed,omitempty"`

	// StorageRaw is the storage of Distributed: accepted and ignored, with
	// a warning. Default: none.
	StorageRaw json.RawMessage `json:"storage,omitempty"`

	rules   []*rule // provisioned
	app     *App
	logger  *zap.Logger
	denials *zap.Logger // logger, sampled: a flood of denials cannot flood the log
	ctx     caddy.Context
	events  *caddyevents.App
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.rate_limit",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
