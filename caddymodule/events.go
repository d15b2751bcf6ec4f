package caddymodule

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/edgebyte/edgelimit/limiter"
)

// Denial log sampling: per handler and second, the first denialsFirst
// lines are written, then one in denialsThereafter.
const (
	denialsFirst      = 20
	denialsThereafter = 1000
)

// sampleDenials wraps the denial logger's core in zap's sampler.
func sampleDenials(core zapcore.Core) zapcore.Core {
	return zapcore.NewSamplerWithOptions(core, time.Second, denialsFirst, denialsThereafter)
}

// exceededEvent is the Caddy event emitted on a denial, for event handlers
// (the events app) to react to, as mholt/caddy-ratelimit emits it.
const exceededEvent = "rate_limit_exceeded"

// logDenial logs a denial at info (sampled); the key only with log_key,
// the client's country only for a rule with geo_multiplier. A denial that
// is served (shadow) logs and emits nothing else.
func (h *Handler) logDenial(ru *rule, q *request, key string, d *limiter.Decision, shadow bool) {
	if !h.denials.Core().Enabled(zap.InfoLevel) { // no entry, no clock read, at level WARN and above
		return
	}
	msg := "rate limit exceeded"
	if shadow {
		msg = "rate limit exceeded (shadow: served)"
	}
	ce := h.denials.Check(zap.InfoLevel, msg)
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.String("rule", ru.Name),
		zap.String("client_ip", q.clientIP()),
		zap.Duration("wait", d.RetryAfter),
	}
	if ru.LogKey {
		fields = append(fields, zap.String("key", shownKey(key)))
	}
	if ru.hasGeo {
		fields = append(fields, zap.String("country", q.where.code))
	}
	ce.Write(fields...)
}

// emitDenial emits the rate_limit_exceeded event, if anything listens:
// the rule, the client IP, the wait in whole seconds, the key only with
// log_key, and the country for a rule with geo_multiplier.
func (h *Handler) emitDenial(ru *rule, q *request, key string, retryAfter int64) {
	if h.events == nil || !h.events.ShouldEmit(exceededEvent) {
		return
	}
	data := map[string]any{
		"rule":        ru.Name,
		"client_ip":   q.clientIP(),
		"retry_after": retryAfter,
	}
	if ru.LogKey {
		data["key"] = shownKey(key)
	}
	if ru.hasGeo {
		data["country"] = q.where.code
	}
	h.events.Emit(h.ctx, exceededEvent, data)
}
