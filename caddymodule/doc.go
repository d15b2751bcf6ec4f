// Package caddymodule is edgelimit's Caddy side: the modules that a Caddy
// built with this plugin registers, and the glue between Caddy's config,
// requests and admin API and the packages that do the work (limiter, geo,
// gossip, redisstore, jwtkey, topkeys), none of which import Caddy.
//
// # The modules
//
//   - http.handlers.rate_limit (Handler, directive rate_limit): decides
//     each request against its rules, answers 429 or passes it on with the
//     rules' headers.
//   - rate_limit (App, global option rate_limit): what is process-wide for
//     a config: the geoip and ASN databases, the JWT verifier, the cluster node,
//     the Redis client, the sweep of idle keys.
//   - admin.api.rate_limit, in package caddymodule/admin: the live state
//     under /rate_limit/ on Caddy's admin endpoint, and the dashboard at
//     /rate_limit/ui/ (with http.handlers.rate_limit_ui, the same on a
//     site's route).
//
// # Where things are
//
// A request walks down the files once:
//
//   - handler.go: the Handler type, its Provision, Validate and Cleanup,
//     and the per-rule warnings.
//   - request.go: what each rule decides a request by (the client
//     address, the country and the autonomous system, once for all
//     rules; a rule's match, exemption, key, cost and scale: its facts).
//     keys.go, tiers.go, geo.go, asn.go and jwt.go read the key sources,
//     tiers, the country, the autonomous system and verified tokens; proxies.go warns of a spoofable client address.
//   - serve.go: ServeHTTP and the rule loop, one step a rule: a block in
//     force (blocks.go), the decision (in process, in the cluster's share,
//     or in Redis through store.go and store_nodes.go), the leaky bucket's
//     hold, and max_concurrent's place (concurrency.go; in Redis,
//     concurrency_store.go). What the request takes and holds is kept in
//     small lists on its stack (inline.go); ledger.go keeps what it took
//     across rate_limit handlers.
//   - refuse.go: the loop's one refusal exit. Whatever the request took
//     is given back (undo), then it is answered: headers (headers.go
//     writes a rule's RateLimit fields, for allowed requests too),
//     Retry-After, the placeholders, the denial's log line and Caddy
//     event, and a 429 or 503 as problem+json, the bare status, or an
//     error for handle_errors.
//   - after.go: count_status and cost_header, reserved before the request
//     and settled once the response's status is known (afterWriter).
//
// Beside the request path:
//
//   - package ruleconfig: Rule, a rule's JSON config, its defaults and the
//     checks of its fields; rule.go: rule, a provisioned Rule with what
//     each request needs, and the checks only provisioning can make
//     (ruleChecks); needs.go: what a rule needs of the App.
//   - app.go: App and its lifecycle (its jwt, cluster and store blocks
//     as configured are package appconfig's); registry.go: the rules'
//     limiters by name, process-wide (registry); cluster.go: the app's
//     use of a cluster node (the node itself runs in
//     internal/clusternode); the Redis clients and the fleet's heartbeat
//     run in internal/redispool. geofile.go: the geoip and asn_db files,
//     opened once and shared across reloads, and checked on disk every
//     geoip_check_interval (watchedDB, one mechanism for both).
//   - persist.go: the rules' snapshots (counters and blocks, encoded by
//     package limiter) written to Caddy's storage every persist_interval
//     and at a graceful stop, and read back at the process's first
//     commit.
//   - stats.go: the rules' counts; metrics.go, metrics_abuse.go,
//     metrics_cluster.go, metrics_concurrency.go and metrics_persist.go
//     export them, the blocks', the cluster's, max_concurrent's and the
//     snapshots', to Prometheus.
//   - package adapt: the Caddyfile adapter (the directive, the global
//     option, caddy-ratelimit's syntax) around package rulesyntax, which
//     reads a rule's subdirectives and the EdgeByte YAML rules file
//     (rules_file, read at Provision through the same subdirective code);
//     compat.go: caddy-ratelimit's zones as JSON (Zone).
//   - overrides.go: per-key overrides set at runtime (the admin API's
//     PUT …/keys/KEY/override): a key's factor on the rule's limits, read
//     in request.go as the tier's is, kept by name across reloads and in
//     the snapshots; overrides_sync.go tells their changes to the
//     cluster's other nodes and keeps them in Redis for store redis rules.
//   - inspect.go: what package admin (the admin API, the dashboard and
//     the rate_limit_ui handler, the third and fourth modules) reads of
//     the rules in force and changes in them (RuleState).
//   - virtual.go: what `caddy rate-limit replay` (package replay, which
//     reads an access log and serves its requests through a config's
//     routes) puts a provisioned config under: the log's clock instead
//     of the wall clock (App.now, read once a request in serve.go), no
//     leaky-bucket wait, Redis not called, and an Observer told of every
//     decision (ruleStats.decided, and factsOf for a request without a
//     key).
//   - doc.go: this map.
//
// # A config's lifecycle, and what survives a reload
//
// A rule's state is keyed by the rule's name, process-wide, so that a
// reload keeps every client's counters:
//
//  1. Provision. Caddy provisions the new config while the old one still
//     serves. Each Handler provisions its rules; each rule asks the App
//     for its limiter (App.limiterFor): the registry's limiter of that
//     name if it can keep its counters under the new limits, else a
//     successor that will adopt the state of the limits it shares with the
//     running one. Nothing changes yet: the change is pending, so that a
//     config that fails to load changes nothing. `caddy validate` stops
//     here (no port is bound, no node counted in Redis).
//  2. Commit, at the App's Start or at the first request of a new
//     handler, whichever comes first (Caddy starts apps in no set order):
//     the pending limiters are put in force, successors adopt their
//     predecessors' keys, the cluster node learns the rules. The
//     process's first commit reads the rules' snapshots from Caddy's
//     storage into their new limiters (persist.go) before any request is
//     decided.
//  3. Running: every persist_interval the rules' changed keys are
//     written to Caddy's storage; the config in force when the process
//     stops writes them once more at its Cleanup.
//  4. Cleanup of the old config releases its references; a limiter no
//     config uses any more is dropped. If the new config failed to start,
//     its Cleanup reverts the registry to the running config's limiters.
//
// Process-wide resources outlive a config the same way, each in a
// caddy.UsagePool keyed by its settings: the geoip and ASN databases
// (geoDatabases), the Redis clients and the fleet heartbeats
// (internal/redispool), the cluster nodes (internal/clusternode, keyed by
// bind address: a reload with an unchanged cluster block keeps the node,
// no rebind, no rejoin). Each has an acquire and a release; a value's
// Destruct stops it with the last release.
//
// The registry of rules is not a UsagePool: a reload does not only share
// a rule's limiter, it replaces it at commit (a successor adopting its
// keys) and puts it back if the new config fails to start. A UsagePool
// holds one value a key for as long as it is used, and has no place for a
// pending successor or for what a commit replaced.
package caddymodule
