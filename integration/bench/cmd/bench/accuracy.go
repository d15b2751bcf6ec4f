package main

import (
	"fmt"
	"log"
	"time"

	"github.com/edgebyte/edgelimit/integration/bench/accuracy"
)

// accuracyRow is one replayed trace.
type accuracyRow = accuracy.Result

// runAccuracy replays accuracy.Profiles (a fiftieth of each, quick).
func runAccuracy(quick bool) ([]accuracyRow, error) {
	var rows []accuracyRow
	for _, p := range accuracy.Profiles() {
		if quick {
			p.Requests, p.Sources = p.Requests/50, p.Sources/50
		}
		r := accuracy.Run(p)
		log.Print(r)
		rows = append(rows, r)
	}
	return rows, nil
}

func accuracySection(p printer, res *results) {
	if len(res.Accuracy) == 0 {
		return
	}
	p("### Accuracy of the sliding window\n\n")
	p("`sliding_window` (the default algorithm) against an exact sliding log (written apart, in `integration/bench/accuracy`), on deterministic traces of bursty sources: ")
	p("each source sends bursts (Poisson, at a rate drawn per burst) and falls silent, in turn. The limit's rate is r; \"near the limit\" bursts at 0.1–0.8 r (10/s) or 0.12–1.5 r (100/min), ")
	p("\"overloaded\" at 0.3–3 r, \"mostly under\" at 0.05–0.5 r with 1%% of the sources at 2–20 r. Cloudflare's published figure for its counter is 0.003%% of 400 M requests wrongly allowed or limited, on its real traffic.\n\n")
	p("| trace | limit | requests | sources | denied by the exact log | decided differently | wrongly allowed | wrongly denied | allowed, window vs log |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Accuracy {
		p("| %s | %d/%v | %d | %d | %.2f%% | **%.3f%%** | %.3f%% | %.3f%% | %+.2f%% |\n", r.Params.Name, r.Params.Limit, shortDuration(r.Params.Window),
			r.Requests, r.ActiveSources, 100*r.DeniedShare(), 100*r.Share(),
			100*float64(r.WronglyAllowed)/float64(r.Requests), 100*float64(r.WronglyDenied)/float64(r.Requests),
			100*(float64(r.AllowedWindow)-float64(r.AllowedLog))/float64(max(r.AllowedLog, 1)))
	}
	p("\n")
}

// shortDuration prints 1s, 1m, 1h.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
