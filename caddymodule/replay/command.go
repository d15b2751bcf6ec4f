package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/edgebyte/edgelimit/caddymodule/replay/accesslog"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "rate-limit",
		Usage: "replay --config <path> [--adapter <name>] --log <file>... [--format text|json] [--from <time>] [--to <time>]",
		Short: "Tools of the rate_limit plugin (replay)",
		Long: `
Tools of the edgelimit rate_limit plugin.

  caddy rate-limit replay --config Caddyfile --log access.log

replays a Caddy JSON access log (plain or gzip, one or many files) against
a config's routes and rate_limit rules on the log's clock, and reports per
rule what the limits would have done: requests, keys, denials, the keys
most denied, each key's peak in the rule's shortest window, and the
smallest limit that would have denied at most 1% of keys. No upstream is
called, no port bound.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.AddCommand(replayCommand())
		},
	})
}

// Options are the flags of `caddy rate-limit replay`.
type Options struct {
	Config   string    // --config: the config file
	Adapter  string    // --adapter: its adapter; "" guesses from the name, as caddy run does
	Logs     []string  // --log: the access log files
	Format   string    // --format: "text" (default) or "json"
	From, To time.Time // --from, --to: the requests replayed, by start; zero: unbounded
}

// replayCommand is `caddy rate-limit replay`.
func replayCommand() *cobra.Command {
	var o Options
	var from, to string
	c := &cobra.Command{
		Use:   "replay --config <path> --log <file>...",
		Short: "Replays an access log against a config's rate limits",
		Long: `
Reads Caddy JSON access logs (plain or gzip; rotated files are read oldest
first), rebuilds each request (method, host, URI, the logged headers, the
client address), and serves it through the config's routes and rate_limit
handlers at the time it started (ts - duration), with reverse_proxy,
file_server and the other handlers that answer replaced by a stand-in.

Lines that are not access-log requests are counted as skipped. Headers the
log redacts (Authorization, Cookie) are absent: a rule keyed by them is
reported as redacted, with its count of requests without a key.

--from and --to take RFC 3339 times or Unix seconds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.From, err = parseTime(from); err != nil {
				return fmt.Errorf("--from: %v", err)
			}
			if o.To, err = parseTime(to); err != nil {
				return fmt.Errorf("--to: %v", err)
			}
			cmd.SilenceUsage = true
			return Run(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().StringVarP(&o.Config, "config", "c", "", "Configuration file (required)")
	c.Flags().StringVarP(&o.Adapter, "adapter", "a", "", "Name of config adapter")
	c.Flags().StringArrayVarP(&o.Logs, "log", "l", nil, "Access log file, plain or gzip (repeatable; required)")
	c.Flags().StringVar(&o.Format, "format", "text", "Output format: text or json")
	c.Flags().StringVar(&from, "from", "", "Replay requests that started at or after this time")
	c.Flags().StringVar(&to, "to", "", "Replay requests that started before this time")
	return c
}

// parseTime reads an RFC 3339 time or Unix seconds; "" is zero.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3), nil // to the µs: a float holds no more
	}
	return time.Parse(time.RFC3339Nano, s)
}

// progressEvery is how often a long replay says how far it is, on stderr.
const progressEvery = 2 * time.Second

// Run replays the logs against the config and writes the report to out,
// progress to progress.
func Run(o Options, out, progress io.Writer) error {
	if o.Config == "" {
		return fmt.Errorf("--config is required")
	}
	if len(o.Logs) == 0 {
		return fmt.Errorf("--log is required")
	}
	if o.Format != "text" && o.Format != "json" && o.Format != "" {
		return fmt.Errorf("--format %q: text or json", o.Format)
	}
	var total int64
	for _, p := range o.Logs {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		total += st.Size()
	}
	rd, err := accesslog.Open(o.Logs)
	if err != nil {
		return err
	}
	defer rd.Close()
	rd.From, rd.To = o.From, o.To
	rp, err := Load(o.Config, o.Adapter)
	if err != nil {
		return err
	}
	start := time.Now()
	next := start.Add(progressEvery)
	var e accesslog.Entry
	for {
		ok, err := rd.Next(&e)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		rp.Replay(&e)
		if rd.Lines&0xfff == 0 && time.Now().After(next) {
			next = next.Add(progressEvery)
			el := time.Since(start).Seconds()
			fmt.Fprintf(progress, "replay: %d lines, %.0f lines/s, %.0f%% of %d bytes\n",
				rd.Lines, float64(rd.Lines)/el, 100*float64(rd.Bytes)/float64(max(total, 1)), total)
		}
	}
	rep := rp.Report()
	rep.Lines, rep.Outside = rd.Lines, rd.Outside
	rep.Skipped += rd.Skipped
	s := rep.Summary()
	if o.Format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	return writeText(out, s)
}

// writeText writes the summary for a reader.
func writeText(w io.Writer, s Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d lines: %d requests replayed, %d skipped (not access-log requests), %d outside --from/--to\n",
		s.Lines, s.Requests, s.Skipped, s.Outside)
	fmt.Fprintf(&b, "429s: %d in the log, %d in the replay, %d in both\n", s.Log429, s.Replay429, s.Both429)
	for _, r := range s.Rules {
		mode := ""
		if r.Shadow {
			mode = " (shadow)"
		}
		fmt.Fprintf(&b, "\nrule %s%s: limit %d per %s\n", r.Name, mode, r.Limit, time.Duration(r.WindowSeconds*1e9))
		fmt.Fprintf(&b, "  requests %d, keys %d\n", r.Requests, r.Keys)
		fmt.Fprintf(&b, "  would deny %d (%.2f%%), keys denied %d\n", r.Denied, r.DeniedPercent, r.DeniedKeys)
		fmt.Fprintf(&b, "  peak units per key in %s: p50 %d, p99 %d, max %d\n", time.Duration(r.WindowSeconds*1e9), r.Peak.P50, r.Peak.P99, r.Peak.Max)
		fmt.Fprintf(&b, "  smallest limit denying at most 1%% of keys: %d\n", r.SuggestedLimit)
		if r.Redacted {
			fmt.Fprintf(&b, "  keyed by %s, which the log redacts: %d requests without a key (enable log_credentials to replay it)\n",
				strings.Join(r.RedactedHeaders, ", "), r.WithoutKey)
		} else if r.WithoutKey > 0 {
			fmt.Fprintf(&b, "  requests without a key: %d\n", r.WithoutKey)
		}
		for i, k := range r.TopDenied {
			if i == 0 {
				b.WriteString("  most denied:\n")
			}
			fmt.Fprintf(&b, "    %-40s %d\n", k.Key, k.Denied)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
