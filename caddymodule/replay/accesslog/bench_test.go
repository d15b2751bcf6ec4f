package accesslog

import (
	"fmt"
	"testing"

	"github.com/edgebyte/edgelimit/internal/cputime"
)

// BenchmarkDecode decodes access-log lines as Caddy writes them (six
// request headers, three response headers): lines/s on one core.
func BenchmarkDecode(b *testing.B) {
	lines := make([][]byte, 1024)
	for i := range lines {
		lines[i] = []byte(line(1_700_000_000+float64(i)/100, 0.0021, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), fmt.Sprintf("/api/items/%d?page=2", i), 200))
	}
	var e Entry
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Used()
	for i := 0; i < b.N; i++ {
		if err := e.Decode(lines[i&1023]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/(cputime.Used()-cpu).Seconds(), "lines/cpu-s")
}
