package adapt

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"golang.org/x/net/http/httpguts"

	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/caddymodule/appconfig"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/caddymodule/rulesyntax"
	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/gossip"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("rate_limit", parseGlobalOption)
}

// parseGlobalOption sets up the rate_limit app from the global option:
//
//	{
//	    rate_limit {
//	        sweep_interval <duration>
//	        persist_interval <duration>       # default 1s: counters and blocks written to Caddy's storage
//	        persist on|off                    # default on; off: a restart starts every rule afresh
//	        geoip <path to a .mmdb file>
//	        geoip_check_interval <duration>   # read a changed geoip or asn_db file without a reload
//	        geo_header <header name>
//	        asn_db <path to an ASN .mmdb file>  # checked here, to name the line, unless a {placeholder}
//	        jwt {
//	            hmac_secret     <secret>        # {env.JWT_SECRET}
//	            public_key_file <pem file>      # repeatable
//	            jwks_file       <jwks file>
//	            algorithms      <alg...>        # required: RS256 ES256 HS256 EdDSA …
//	            issuer          <iss>
//	            audience        <aud>
//	            leeway          <duration>
//	            from_header     <name>          # default: Authorization: Bearer
//	            from_cookie     <name>
//	            unverified                      # the jwt_unverified opt-in
//	        }
//	        cluster {
//	            bind          <host:port>       # default 0.0.0.0:7946
//	            advertise     <host:port>       # the address other nodes reach this one at
//	            join          <host:port...>    # repeatable: adds
//	            secret_key    <key...>          # base64, 16/24/32 bytes, {env.EDGELIMIT_GOSSIP_KEY}; the first encrypts, all decrypt
//	            node_name     <name>
//	            label         <label>           # default edgelimit
//	            sync_interval <duration>        # default 100ms
//	            on_partition  local_share|fail_open|fail_closed
//	            max_keys      <count>           # hot keys followed; default 10000
//	        }
//	        store redis {
//	            address           <host:port...>   # repeatable: adds; Cluster seeds, or Sentinels
//	            username          <user>
//	            password          <password>       # {env.REDIS_PASSWORD}
//	            db                <n>              # default 0
//	            tls               [on|off]         # default off
//	            timeout           <duration>       # per call on the request path; default 50ms
//	            key_prefix        <prefix>         # default edgelimit:
//	            cluster           on|off           # default off: addresses are Redis Cluster seeds
//	            sentinel_master   <name>           # addresses are Sentinels
//	            sentinel_username <user>           # ACL user on the Sentinels (6.2+); with sentinel_master
//	            sentinel_password <password>       # the Sentinels' password, {env.SENTINEL_PASSWORD}; with sentinel_master
//	            probe_interval    <duration>       # default 1s
//	            coalesce          on|off           # default off: concurrent requests of a key share a call
//	            over_limit_cache  on|off           # default on: a key Redis denied is denied locally until its Retry-After
//	            pipeline          on|off           # default on: concurrent requests' calls share round trips
//	        }
//	    }
//	}
//
// The block may be empty. Given twice, the second adds to the first, but
// jwt, cluster and store may each be given once in all. A secret_key is required
// unless bind is a loopback address.
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(caddymodule.App)
	if prev, ok := existing.(httpcaddyfile.App); ok && len(prev.Value) > 0 {
		if err := json.Unmarshal(prev.Value, app); err != nil {
			return nil, d.Errf("reading the earlier rate_limit option: %v", err)
		}
	}
	d.Next() // the option's name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	top := rulesyntax.NewBlock("", rulesyntax.Once("jwt", "cluster", "store"))
	for sub, given := range map[string]bool{"jwt": app.JWT != nil, "cluster": app.Cluster != nil, "store": app.Store != nil} {
		if given { // by an earlier rate_limit option: at no line of this one
			top.Set[sub] = caddyfile.Token{Text: sub}
		}
	}
	err := top.Read(d, func(sub string) error {
		var err error
		switch sub {
		case "sweep_interval":
			every, err := rulesyntax.IntervalArg(d, "sweep_interval")
			if err != nil {
				return err
			}
			if every < caddymodule.MinSweepInterval {
				return d.Errf("sweep_interval %s: must be at least %s (each sweep visits every key)", time.Duration(every), caddymodule.MinSweepInterval)
			}
			app.SweepInterval = caddy.Duration(every)

		case "persist_interval":
			every, err := rulesyntax.IntervalArg(d, "persist_interval")
			switch {
			case err != nil:
				return err
			case every < caddymodule.MinPersistInterval:
				return d.Errf("persist_interval %s: must be at least %s (each write scans every key)", every, caddymodule.MinPersistInterval)
			case app.PersistOff:
				return d.Errf("persist_interval: not with persist off")
			}
			app.PersistInterval = caddy.Duration(every)

		case "persist":
			on := true
			if err = onOffArg(d, "persist", &on, false); err == nil {
				app.PersistOff = !on
				if app.PersistOff && app.PersistInterval != 0 {
					return d.Errf("persist off: not with persist_interval")
				}
			}

		case "geoip", "geo_header":
			if !d.NextArg() {
				return d.Errf("%s: expected one argument", sub)
			}
			if sub == "geoip" {
				app.GeoIP = d.Val()
			} else if app.GeoHeader = d.Val(); !httpguts.ValidHeaderFieldName(app.GeoHeader) {
				return d.Errf("geo_header %q: not a valid header name", app.GeoHeader)
			}
			if d.NextArg() {
				return d.Errf("%s: expected one argument, got also %q", sub, d.Val())
			}

		case "asn_db":
			if err := rulesyntax.OneArg(d, &app.ASNDB); err != nil {
				return err
			}
			// checked here to name the line; a placeholder ({env.ASN_DB})
			// is left for load, which may be on another machine
			if !strings.Contains(app.ASNDB, "{") {
				if err := geo.CheckASN(app.ASNDB); err != nil {
					return d.Errf("asn_db: %v", err)
				}
			}

		case "geoip_check_interval":
			every, err := rulesyntax.IntervalArg(d, "geoip_check_interval")
			if err != nil {
				return err
			}
			app.GeoIPCheckInterval = caddy.Duration(every)

		case "jwt":
			app.JWT, err = parseJWTBlock(d)
		case "cluster":
			app.Cluster, err = parseClusterBlock(d)
		case "store":
			app.Store, err = parseStoreBlock(d)

		default:
			return d.Errf("unrecognized subdirective %q", sub)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "rate_limit", Value: caddyconfig.JSON(app, nil)}, nil
}

// parseJWTBlock reads the jwt { … } block of the global option.
func parseJWTBlock(d *caddyfile.Dispenser) (*appconfig.JWTConfig, error) {
	cfg := new(appconfig.JWTConfig)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	block := rulesyntax.NewBlock("jwt", rulesyntax.Repeatable("public_key_file"))
	err := block.Read(d, func(sub string) error {
		var err error
		switch sub {
		case "hmac_secret":
			err = rulesyntax.OneArg(d, &cfg.HMACSecret)
		case "public_key_file":
			var f string
			err = rulesyntax.OneArg(d, &f)
			cfg.PublicKeyFiles = append(cfg.PublicKeyFiles, f)
		case "jwks_file":
			err = rulesyntax.OneArg(d, &cfg.JWKSFile)
		case "algorithms":
			cfg.Algorithms = d.RemainingArgs()
			if len(cfg.Algorithms) == 0 {
				return d.Errf("jwt: algorithms: list the accepted algorithms, such as RS256 ES256")
			}
		case "issuer":
			err = rulesyntax.OneArg(d, &cfg.Issuer)
		case "audience":
			err = rulesyntax.OneArg(d, &cfg.Audience)
		case "leeway":
			var arg string
			if err = rulesyntax.OneArg(d, &arg); err == nil {
				var dur time.Duration
				if dur, err = rulesyntax.DurationArg(d, "jwt leeway", arg); err == nil {
					cfg.Leeway = caddy.Duration(dur)
				}
			}
		case "from_header":
			err = rulesyntax.OneArg(d, &cfg.FromHeader)
			if err == nil && !httpguts.ValidHeaderFieldName(cfg.FromHeader) {
				return d.Errf("jwt: from_header %q: not a valid header name", cfg.FromHeader)
			}
		case "from_cookie":
			err = rulesyntax.OneArg(d, &cfg.FromCookie)
		case "unverified":
			err = rulesyntax.FlagArg(d, &cfg.Unverified)
		default:
			return d.Errf("jwt: unrecognized subdirective %q", sub)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(cfg.Algorithms) == 0 {
		return nil, d.Errf("jwt: algorithms is required (such as algorithms RS256)")
	}
	if cfg.FromHeader != "" && cfg.FromCookie != "" {
		return nil, d.Errf("jwt: from_header and from_cookie: give one")
	}
	return cfg, nil
}

// maxClusterLabel is the longest cluster label (memberlist.LabelMaxSize).
const maxClusterLabel = 255

// parseClusterBlock reads the cluster { … } block of the global option. It
// checks what it can without replacing placeholders; the rest (keys from
// placeholders, a key being required beyond loopback when the bind address
// is a placeholder) is checked when the app starts (ClusterConfig.settings).
func parseClusterBlock(d *caddyfile.Dispenser) (*appconfig.ClusterConfig, error) {
	cfg := new(appconfig.ClusterConfig)
	start := d.Token()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	block := rulesyntax.NewBlock("cluster", rulesyntax.Repeatable("join"))
	err := block.Read(d, func(sub string) error {
		var err error
		switch sub {
		case "bind":
			if err = rulesyntax.OneArg(d, &cfg.Bind); err == nil {
				err = hostPortArg(d, "bind", cfg.Bind)
			}
		case "advertise":
			if err = rulesyntax.OneArg(d, &cfg.Advertise); err == nil {
				err = hostPortArg(d, "advertise", cfg.Advertise)
			}
		case "join":
			nodes := d.RemainingArgs()
			if len(nodes) == 0 {
				return d.Errf("cluster: join: list the host:port of one or more nodes")
			}
			for _, n := range nodes {
				if err := hostPortArg(d, "join", n); err != nil {
					return err
				}
			}
			cfg.Join = append(cfg.Join, nodes...)
		case "secret_key":
			cfg.SecretKeys = d.RemainingArgs()
			if len(cfg.SecretKeys) == 0 {
				return d.Errf("cluster: secret_key: give one or more base64 keys, such as {env.EDGELIMIT_GOSSIP_KEY} (the first encrypts, all decrypt)")
			}
			for i, k := range cfg.SecretKeys {
				if err := secretKeyArg(d, i, k); err != nil {
					return err
				}
			}
		case "node_name":
			err = rulesyntax.OneArg(d, &cfg.NodeName)
			if err == nil && !strings.Contains(cfg.NodeName, "{") && len(cfg.NodeName) > gossip.MaxNodeName {
				return d.Errf("cluster node_name: %d bytes, the most is %d", len(cfg.NodeName), gossip.MaxNodeName)
			}
		case "label":
			err = rulesyntax.OneArg(d, &cfg.Label)
			if err == nil && len(cfg.Label) > maxClusterLabel {
				return d.Errf("cluster label: %d bytes, the most is %d", len(cfg.Label), maxClusterLabel)
			}
		case "sync_interval":
			var every time.Duration
			if every, err = rulesyntax.IntervalArg(d, "cluster sync_interval"); err == nil {
				cfg.SyncInterval = caddy.Duration(every)
			}
		case "on_partition":
			err = rulesyntax.OneArg(d, &cfg.OnPartition)
			if err == nil {
				switch cfg.OnPartition {
				case appconfig.PartitionLocalShare, appconfig.PartitionFailOpen, appconfig.PartitionFailClosed:
				default:
					return d.Errf("cluster on_partition %q: want local_share, fail_open or fail_closed", cfg.OnPartition)
				}
			}
		case "max_keys":
			var arg string
			if err = rulesyntax.OneArg(d, &arg); err == nil {
				n, perr := strconv.Atoi(arg)
				if perr != nil || n < 0 {
					return d.Errf("cluster max_keys %s: must be a whole number ≥ 0 (0: the default, 10000)", arg)
				}
				cfg.MaxKeys = n
			}
		default:
			return d.Errf("cluster: unrecognized subdirective %q", sub)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(cfg.SecretKeys) == 0 && !strings.Contains(cfg.Bind, "{") {
		bind := cfg.Bind
		if bind == "" {
			bind = gossip.DefaultBind
		}
		if err := gossip.CheckBind(bind, 0); err != nil {
			return nil, rulesyntax.ErrAt(start, "cluster: bind %s: %v", bind, err)
		}
	}
	return cfg, nil
}

// hostPortArg checks an address of the cluster block: host:port with a
// port number, unless it has a placeholder.
func hostPortArg(d *caddyfile.Dispenser, what, addr string) error {
	if strings.Contains(addr, "{") {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return d.Errf("cluster %s %q: want host:port, such as 10.0.0.5:7946", what, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return d.Errf("cluster %s %q: the port must be a number from 0 to 65535", what, addr)
	}
	return nil
}

// secretKeyArg checks the i-th (from 0) key of secret_key, unless it has
// a placeholder. Errors do not quote the key.
func secretKeyArg(d *caddyfile.Dispenser, i int, key string) error {
	if strings.Contains(key, "{") {
		return nil
	}
	if err := appconfig.CheckSecretKey(i, key); err != nil {
		return d.Errf("%v", err)
	}
	return nil
}

// parseStoreBlock reads `store redis { … }` of the global option. What
// holds a placeholder is checked when the config loads
// (RedisConfig.settings).
func parseStoreBlock(d *caddyfile.Dispenser) (*appconfig.StoreConfig, error) {
	start := d.Token()
	var kind string
	if !d.NextArg() {
		return nil, d.Errf("store: want redis, as in `store redis { address 10.0.0.9:6379 }`")
	}
	if kind = d.Val(); kind != ruleconfig.StoreRedis {
		return nil, d.Errf("store %q: want redis", kind)
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	cfg := new(appconfig.RedisConfig)
	block := rulesyntax.NewBlock("store redis", rulesyntax.Repeatable("address"))
	err := block.Read(d, func(sub string) error {
		var err error
		switch sub {
		case "address":
			addrs := d.RemainingArgs()
			if len(addrs) == 0 {
				return d.Errf("store redis: address: give host:port, such as 10.0.0.9:6379")
			}
			for _, a := range addrs {
				if strings.Contains(a, "{") {
					continue
				}
				if err := appconfig.CheckRedisAddress(a); err != nil {
					return d.Errf("%v", err)
				}
			}
			cfg.Addresses = append(cfg.Addresses, addrs...)
		case "username":
			err = rulesyntax.OneArg(d, &cfg.Username)
		case "password":
			err = rulesyntax.OneArg(d, &cfg.Password)
		case "db":
			var arg string
			if err = rulesyntax.OneArg(d, &arg); err == nil {
				n, perr := strconv.Atoi(arg)
				if perr != nil || n < 0 {
					return d.Errf("store redis: db %s: must be a whole number ≥ 0", arg)
				}
				cfg.DB = n
			}
		case "tls":
			err = onOffArg(d, "store redis tls", &cfg.TLS, true)
		case "timeout", "probe_interval":
			var every time.Duration
			if every, err = rulesyntax.IntervalArg(d, "store redis "+sub); err == nil {
				if sub == "timeout" {
					cfg.Timeout = caddy.Duration(every)
				} else {
					cfg.ProbeInterval = caddy.Duration(every)
				}
			}
		case "key_prefix":
			if err = rulesyntax.OneArg(d, &cfg.KeyPrefix); err == nil && strings.ContainsAny(cfg.KeyPrefix, "{}") {
				return d.Errf("store redis: key_prefix %q: must not contain '{' or '}' (they would move the Redis Cluster hash tag)", cfg.KeyPrefix)
			}
		case "cluster":
			err = onOffArg(d, "store redis cluster", &cfg.Cluster, false)
		case "sentinel_master":
			err = rulesyntax.OneArg(d, &cfg.SentinelMaster)
		case "coalesce", "over_limit_cache", "pipeline":
			on := true
			if err = onOffArg(d, "store redis "+sub, &on, true); err == nil {
				switch sub {
				case "coalesce":
					cfg.Coalesce = on
				case "over_limit_cache":
					cfg.NoOverLimitCache = !on
				default:
					cfg.NoPipeline = !on
				}
			}
		case "sentinel_username":
			err = rulesyntax.OneArg(d, &cfg.SentinelUsername)
		case "sentinel_password":
			err = rulesyntax.OneArg(d, &cfg.SentinelPassword)
		default:
			return d.Errf("store redis: unrecognized subdirective %q", sub)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case len(cfg.Addresses) == 0:
		return nil, rulesyntax.ErrAt(start, "store redis: address is required (host:port of the server, the Redis Cluster seeds or the Sentinels)")
	case cfg.SentinelMaster == "" && (cfg.SentinelUsername != "" || cfg.SentinelPassword != ""):
		tok, ok := block.Set["sentinel_username"]
		if !ok {
			tok = block.Set["sentinel_password"]
		}
		return nil, rulesyntax.ErrAt(tok, "store redis: sentinel_username and sentinel_password need sentinel_master (they authenticate to Sentinels; password is the server's)")
	case cfg.Cluster && cfg.SentinelMaster != "":
		return nil, rulesyntax.ErrAt(block.Set["sentinel_master"], "store redis: cluster on and sentinel_master: choose one (a Redis Cluster, or a master found through Sentinels)")
	case len(cfg.Addresses) > 1 && !cfg.Cluster && cfg.SentinelMaster == "":
		return nil, rulesyntax.ErrAt(block.Set["address"], "store redis: %d addresses: one server has one address (several are the seeds of a Redis Cluster with cluster on, or Sentinels with sentinel_master)", len(cfg.Addresses))
	case cfg.Cluster && cfg.DB != 0:
		return nil, rulesyntax.ErrAt(block.Set["db"], "store redis: db %d: a Redis Cluster has only db 0", cfg.DB)
	}
	return &appconfig.StoreConfig{Redis: cfg}, nil
}

// onOffArg reads `on` or `off` into dst; with bare, the subdirective
// alone means on.
func onOffArg(d *caddyfile.Dispenser, what string, dst *bool, bare bool) error {
	if !d.NextArg() {
		if bare {
			*dst = true
			return nil
		}
		return d.Errf("%s: want on or off", what)
	}
	switch d.Val() {
	case "on":
		*dst = true
	case "off":
		*dst = false
	default:
		return d.Errf("%s %q: want on or off", what, d.Val())
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}
