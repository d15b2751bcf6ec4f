// Package replay is `caddy rate-limit replay`: what a config's rate limits
// would have done to the requests of a Caddy access log.
//
// The log is read by package accesslog (the files in time order, lines
// that are not requests counted and passed over). Each request is rebuilt
// (method, host, URI, the logged headers, the peer and the logged
// client_ip) and served through the config's own routes, the config
// adapted and provisioned in this process as `caddy validate` does:
// nothing is started, no port bound. Every rate_limit handler is put
// under caddymodule.Virtual: it decides at the request's start (ts −
// duration), in process, and tells the Report of each decision.
//
//   - command.go: the command, its flags, and the loop from the reader to
//     the Replayer, with a progress line on stderr.
//   - engine.go: the Replayer: loading the config, choosing the server
//     a request was served by, serving it.
//   - request.go: the one request a server serves every line with, set
//     up as Caddy's PrepareRequest sets up a live one, reset for each line
//     (a new replacer a line).
//   - routes.go: the server's routes compiled once, each route's handlers
//     chained at load, matched as Caddy's own route list matches them.
//   - standins.go: which handlers run as configured, and the stand-ins
//     for those that would answer (reverse_proxy, file_server, respond)
//     or do anything else.
//   - report.go: the counts by rule, the keys' peaks in the rule's
//     shortest window, and the summary, as text or JSON.
//
// Guarantees: the requests of a log are decided in its order, one at a
// time, by the config's own code on the log's clock: replaying the access
// log of a live run against the same config predicts its 429s request by
// request, where the live decisions did not depend on what the log does
// not have. Non-guarantees: headers the log redacts (Authorization,
// Cookie, unless log_credentials) are absent; max_concurrent and
// max_held never refuse (requests are not in flight together); rules
// with store redis or scope cluster are decided as by one node holding
// the whole limit; requests live decided in an order other than the
// log's (concurrent ones) may be decided differently at the edge of a
// limit; handlers the replay passes through (authentication among them)
// are taken to let every request on.
package replay
