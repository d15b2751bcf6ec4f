package caddymodule

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/edgebyte/edgelimit/caddymodule/appconfig"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/limiter"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the process-wide side of rate limiting (global option
// `rate_limit`): it owns the rules' counters, so that they survive config
// reloads, sweeps idle keys, and tells the country of a client for rules
// with geo_multiplier and its autonomous system for rules keyed by asn or
// with asn_multiplier. Handlers find it through ctx.App.
type App struct {
	// SweepInterval is how often idle keys are freed, at least 1s.
	// Default: 1m.
	SweepInterval caddy.Duration `json:"sweep_interval,omitempty"`

	// GeoIP is the path of a MaxMind-format database (GeoLite2 or GeoIP2
	// Country or City, DB-IP Country or City) that gives the country of a
	// client IP to rules with geo_multiplier. It is read when the config
	// loads (a missing, unreadable, corrupt or country-less file fails the
	// load, naming the path) and shared by later configs while the file is
	// unchanged; a reload after the file changed reads it anew. Global
	// placeholders such as {env.GEOIP_DB} are replaced. Default: none.
	GeoIP string `json:"geoip,omitempty"`

	// GeoIPCheckInterval, if set, is how often the geoip and asn_db files
	// are checked for a change (their size or modification time): a
	// changed file is read and put in force at once, without a reload; a
	// file that fails to read is logged and the database in force stays.
	// Replace a file by renaming a new one over it, as geoipupdate does.
	// Default: 0, no checks (a changed file is read at the next reload).
	GeoIPCheckInterval caddy.Duration `json:"geoip_check_interval,omitempty"`

	// GeoHeader names a request header that holds the client's country
	// code, set by a proxy or CDN in front of Caddy (CF-IPCountry,
	// CloudFront-Viewer-Country). It is believed only on requests whose
	// immediate peer is one of the server's trusted_proxies, so clients
	// cannot choose their own country; elsewhere, or when it names no
	// country (XX, T1), the geoip database decides if there is one.
	// Default: none.
	GeoHeader string `json:"geo_header,omitempty"`

	// ASNDB is the path of a MaxMind-format ASN database (GeoLite2-ASN,
	// GeoIP2-ISP) that gives the autonomous system of a client IP to
	// rules keyed by asn or with asn_multiplier. It is read when the
	// config loads (a missing, unreadable or corrupt file, or one without
	// AS numbers such as a Country database, fails the load, naming the
	// path) and shared by later configs while the file is unchanged; a
	// reload after the file changed reads it anew. Global placeholders
	// such as {env.ASN_DB} are replaced. Default: none.
	ASNDB string `json:"asn_db,omitempty"`

	// JWT says how tokens are found and verified for rules keyed by a
	// claim (by jwt CLAIM). Default: none; such rules then fail to load.
	JWT *appconfig.JWTConfig `json:"jwt,omitempty"`

	// Cluster, if set, makes this Caddy a node of a fleet that shares the
	// rules' limits (see ClusterConfig). Default: none, every node limits
	// alone.
	Cluster *appconfig.ClusterConfig `json:"cluster,omitempty"`

	// PersistInterval is how often every rule's counters and blocks are
	// written to Caddy's storage (the storage global option; by default
	// the file system under Caddy's data directory), so that a restart
	// goes on counting where the process stopped: only the keys changed
	// since the last write are written, and once more at a graceful stop.
	// A process killed without one loses at most this much counting.
	// At least 100ms. Default: 1s.
	PersistInterval caddy.Duration `json:"persist_interval,omitempty"`

	// PersistOff turns the snapshots off: nothing is written or read, and
	// a restart starts every rule afresh. Default: false (on).
	PersistOff bool `json:"persist_off,omitempty"`

	// Store is where rules with `store redis` keep their state: a Redis
	// shared by every node, for exact global limits (see StoreConfig).
	// Default: none; such rules then fail to load.
	Store *appconfig.StoreConfig `json:"store,omitempty"`

	// Each concern's state, provisioned and cleaned up by its own type;
	// nil when its option is not set.
	tokens  *tokens     // JWT
	geo     *countries  // GeoIP and GeoHeader
	asn     *asnDB      // ASNDB
	cluster *clusterUse // Cluster
	redis   *redisUse   // Store
	persist *persistUse // PersistInterval, unless PersistOff (persist.go)

	logger  *zap.Logger
	events  *caddyevents.App // for the overrides' events (overrides.go)
	ctx     caddy.Context    // the config's, for the http app at Start
	virtual *Virtual         // set by a replay (virtual.go); nil when live

	// The config's lifecycle (see doc.go).
	pending   []pendingRule // the rules' limiters, put in force at commit
	handlers  int           // rate_limit handlers in this config; set while provisioning
	committed sync.Once     // puts pending in force: at Start, or at the first request if sooner
	replaced  *App          // the app that was active when this one committed
	running   atomic.Bool   // between Start and Stop
	stopOnce  sync.Once     // Stop and Cleanup may both stop the sweeping
	stop      chan struct{} // made at Start
	done      chan struct{}
	persisted chan struct{} // the persist loop's done, if it runs
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "rate_limit",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets defaults and provisions each concern whose option is
// set. It binds no port and counts no node: caddy validate stops here.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.ctx = ctx
	events, err := ctx.App("events")
	if err != nil {
		return fmt.Errorf("loading events app: %v", err)
	}
	a.events = events.(*caddyevents.App)
	if a.SweepInterval == 0 {
		a.SweepInterval = caddy.Duration(time.Minute)
	}
	if !a.PersistOff {
		if a.PersistInterval == 0 {
			a.PersistInterval = caddy.Duration(DefaultPersistInterval)
		}
		a.persist = &persistUse{storage: ctx.Storage(), interval: time.Duration(a.PersistInterval)}
	}
	if reg := ctx.GetMetricsRegistry(); reg != nil {
		if err := registerMetrics(reg); err != nil {
			return fmt.Errorf("registering metrics: %v", err)
		}
	}
	if a.GeoHeader != "" || a.GeoIP != "" {
		if a.geo, err = provisionCountries(a.GeoIP, a.GeoHeader, a.logger); err != nil {
			return err
		}
	}
	if a.ASNDB != "" {
		if a.asn, err = provisionASNDB(a.ASNDB, a.logger); err != nil {
			return err
		}
	}
	if a.JWT != nil {
		if a.tokens, err = newTokens(a.JWT, a.logger); err != nil {
			return err
		}
	}
	if a.Cluster != nil {
		if a.cluster, err = provisionCluster(a.Cluster); err != nil {
			return err
		}
	}
	if a.Store != nil {
		if a.redis, err = provisionRedis(a.Store); err != nil {
			return err
		}
	}
	return nil
}

// geoDB is the geoip database in force, or nil.
func (a *App) geoDB() *geo.DB {
	if a.geo == nil {
		return nil
	}
	return a.geo.file.load()
}

// Validate checks the configuration.
func (a *App) Validate() error {
	if a.GeoIPCheckInterval < 0 || (a.GeoIPCheckInterval > 0 && a.GeoIP == "" && a.ASNDB == "") {
		return fmt.Errorf("geoip_check_interval %s: must be positive, with geoip or asn_db", time.Duration(a.GeoIPCheckInterval))
	}
	if a.SweepInterval != 0 && a.SweepInterval < caddy.Duration(MinSweepInterval) {
		return fmt.Errorf("sweep_interval %s: must be at least %s (each sweep visits every key)", time.Duration(a.SweepInterval), MinSweepInterval)
	}
	if a.PersistInterval != 0 && (a.PersistOff || a.PersistInterval < caddy.Duration(MinPersistInterval)) {
		return fmt.Errorf("persist_interval %s: must be at least %s, without persist off", time.Duration(a.PersistInterval), MinPersistInterval)
	}
	if a.GeoHeader != "" && !httpguts.ValidHeaderFieldName(a.GeoHeader) {
		return fmt.Errorf("geo_header %q: not a valid header name", a.GeoHeader)
	}
	return nil
}

// Start puts the rules of this config in force: limiters kept from the
// previous config take the new limits now (not at Provision, so a config
// that fails to load changes nothing), and begins sweeping idle keys.
func (a *App) Start() error {
	a.commit()
	warnSpoofableClientIP(a.ctx, a.logger)
	if a.cluster != nil {
		if err := a.cluster.start(a.logger, a.sharedRules()); err != nil {
			return fmt.Errorf("rate_limit cluster: %v", err)
		}
	}
	if a.redis != nil {
		a.redis.start(a.logger)
	}
	a.stop, a.done = make(chan struct{}), make(chan struct{})
	go a.sweep(time.Duration(a.SweepInterval), time.Duration(a.GeoIPCheckInterval))
	if a.persist != nil {
		a.persisted = make(chan struct{})
		go a.persistLoop(a.stop, a.persisted)
	}
	a.running.Store(true)
	return nil
}

// commit puts this config's rules in force, once. Caddy starts apps in no
// set order, so the http app may serve the new handlers before this app
// starts: their first request commits too, so that no request is decided
// by a successor that has not yet adopted its predecessor's keys.
func (a *App) commit() {
	a.committed.Do(func() {
		registry.commit(a, a.pending)
		var restored map[string]bool
		if a.persist != nil {
			restored = snapshots.restore(a.persist.storage, registry.list(), a.logger)
		}
		for i := range a.pending {
			a.logRule(a.pending[i].rule, a.pending[i].lim, a.pending[i].from, restored[a.pending[i].name])
			a.pending[i].from = nil // adopted: let it go
		}
		if sh := a.sharing(); sh != nil {
			sh.SetRules(a.sharedRules())
		}
		a.replaced = activeApp.Swap(a)
	})
}

// activeApp is the app of the config that started last, for the admin API.
var activeApp atomic.Pointer[App]

// MinSweepInterval is the shortest sweep_interval: a sweep locks each
// shard of every rule in turn, so a sweep every few nanoseconds would take
// a core and slow every decision.
const MinSweepInterval = time.Second

// MinPersistInterval is the shortest persist_interval: each write scans
// every key of every rule.
const MinPersistInterval = 100 * time.Millisecond

// Cleanup puts back the rules this config put in force if the config that
// ran before it is still running (this one failed to start), so a config
// that fails to load changes nothing.
func (a *App) Cleanup() error {
	a.Stop() // Caddy cleans up without stopping when a config fails after starting its apps
	if a.persist != nil && activeApp.Load() == a {
		a.finalWrite() // no config runs after this one: a graceful stop
	}
	registry.revert(a)
	back := a.replaced
	if back != nil && !back.running.Load() {
		back = nil // it is gone too: keep nothing of it
	}
	activeApp.CompareAndSwap(a, back) // as revert: back if this config failed to start
	a.replaced = nil
	if a.cluster != nil {
		a.cluster.cleanup()
	}
	if a.redis != nil {
		a.redis.cleanup()
	}
	err := a.asn.cleanup()
	if a.geo != nil {
		err = errors.Join(err, a.geo.cleanup())
	}
	return err
}

// Stop ends the sweeping. Counters stay in the registry for the next config.
func (a *App) Stop() error {
	a.running.Store(false)
	a.stopOnce.Do(func() {
		if a.stop != nil { // started
			close(a.stop)
			<-a.done
			if a.persisted != nil {
				<-a.persisted
			}
		}
	})
	return nil
}

// sweep frees idle keys every sweep interval, checks the geoip and ASN
// database files every check interval (if set), and reads the overrides
// of rules with store redis every overrideSyncInterval, until Stop.
func (a *App) sweep(every, checkGeo time.Duration) {
	defer close(a.done)
	t := time.NewTicker(every)
	defer t.Stop()
	var check, poll <-chan time.Time
	if checkGeo > 0 {
		c := time.NewTicker(checkGeo)
		defer c.Stop()
		check = c.C
	}
	if a.redis != nil && len(a.redis.stores) > 0 {
		p := time.NewTicker(overrideSyncInterval)
		defer p.Stop()
		poll = p.C
		a.redis.syncOverrides(time.Now())
	}
	for {
		select {
		case <-a.stop:
			return
		case now := <-t.C:
			registry.sweep(now)
		case <-check:
			a.checkFiles()
		case now := <-poll:
			a.redis.syncOverrides(now) // overrides_sync.go
		}
	}
}

// checkFiles reads the geoip and ASN database files again if they changed
// on disk (geoip_check_interval), each through watchedDB.checkFile.
func (a *App) checkFiles() {
	if a.geo != nil {
		a.geo.file.checkFile()
	}
	a.asn.checkFile()
}

// limiterFor returns the limiter that a rule should use, and the rule's
// statistics: the running limiter of the rule's name, if it can keep its
// counters under the rule's limits (a changed limit, window, burst or
// max_keys keeps them), else a successor that adopts the state of the
// limits it shares with the running one (same window, same algorithm)
// when the config starts. The change is recorded and applied when the
// config starts. Each call must be paired with a release of the name.
func (a *App) limiterFor(rule ruleconfig.Rule, clustered bool) (*limiter.Limiter, *ruleStats, error) {
	name, cfg := rule.Name, rule.LimiterConfig()
	cfg.Shares = clustered
	for _, p := range a.pending {
		if p.name != name {
			continue
		}
		if !reflect.DeepEqual(p.cfg, cfg) {
			return nil, nil, fmt.Errorf("rule %q is configured twice, with different limits; rules sharing a name must agree", name)
		}
		registry.addRef(name)
		return p.lim, p.stats, nil
	}
	lim, from, stats, err := registry.acquire(name, cfg)
	if err != nil {
		return nil, nil, err
	}
	a.pending = append(a.pending, pendingRule{name: name, lim: lim, from: from, cfg: cfg, rule: rule, stats: stats})
	return lim, stats, nil
}

// logRule logs, at info, a rule this config puts in force (at commit):
// its limits and what becomes of its counters (restored: read back from
// its snapshot, persist.go).
func (a *App) logRule(rule ruleconfig.Rule, lim, from *limiter.Limiter, restored bool) {
	counters := "new"
	switch {
	case restored:
		counters = "restored from the snapshot"
	case from != nil:
		counters = "carried over from the running config (limits with the same window and algorithm)"
	case lim.Len() > 0 || lim.Evictions() > 0:
		counters = "kept"
	}
	limits := make([]string, len(rule.Limits))
	for i, l := range rule.Limits {
		limits[i] = fmt.Sprintf("%d/%s", l.Count, l.Text())
	}
	algorithm := rule.AlgorithmInForce()
	by := rule.By
	if len(by) == 0 {
		by = []string{"ip"}
	}
	fields := []zap.Field{
		zap.String("rule", rule.Name),
		zap.Strings("limits", limits),
		zap.String("algorithm", algorithm),
		zap.Strings("by", by),
		zap.String("counters", counters),
	}
	if rule.Burst > 0 {
		fields = append(fields, zap.Int64("burst", rule.Burst))
	}
	if len(rule.GeoMultiplier) > 0 {
		fields = append(fields, zap.Any("geo_multiplier", rule.GeoMultiplier))
	}
	if len(rule.ASNMultiplier) > 0 {
		fields = append(fields, zap.Any("asn_multiplier", rule.ASNMultiplier))
	}
	if rule.Shadow {
		fields = append(fields, zap.Bool("shadow", true))
	}
	a.logger.Info("rate limit rule", fields...)
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
