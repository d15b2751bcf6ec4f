package geo

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// BenchmarkASNLookup looks up addresses in the small ASN database of the
// tests, and random addresses inside the networks of one the size of
// GeoLite2-ASN (asnSizedDB), to set beside BenchmarkCountry's "country".
func BenchmarkASNLookup(b *testing.B) {
	small := openASN(b, buildDB(b, "GeoLite2-ASN", 6, 24, asnNetworks()).path)
	for _, family := range []string{"v4", "v6"} {
		benchASN(b, family, small, benchAddrs[family])
	}
	db, addrs := asnSizedDB(b)
	for _, family := range []string{"v4", "v6"} {
		benchASN(b, "asn-sized/"+family, db, addrs[family])
	}
}

func benchASN(b *testing.B, name string, db *ASNDB, addrs []netip.Addr) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			db.Lookup(addrs[i%len(addrs)])
			i++
		}
	})
}

// asnSizedDB builds a database the size of GeoLite2-ASN: about 350,000
// IPv4 networks of /12 to /24 and 150,000 IPv6 ones of /19 to /48, over
// 60,000 autonomous systems, and returns it with random addresses of
// each family inside its networks.
func asnSizedDB(b *testing.B) (*ASNDB, map[string][]netip.Addr) {
	b.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	records := make([]mmdbtype.Map, 60_000)
	for i := range records {
		records[i] = asnRecordOf(uint32(i+1), fmt.Sprintf("ORGANIZATION %d", i+1))
	}
	nets := layoutNetworks(rng, 350_000, 12, 150_000, 19, func(rng *rand.Rand) mmdbtype.Map {
		return records[rng.IntN(len(records))]
	})
	db := openASN(b, writeNetworks(b, "GeoLite2-ASN", nets).path)
	b.Logf("%d networks: %+v, of which tables %d bytes, %d IPv4 and %d IPv6 ranges", len(nets), db.Info(), db.t.bytes(), len(db.t.v4.values), len(db.t.v6.values))
	addrs := randomAddrs(rng, nets, 1<<17)
	runtime.GC()
	return db, addrs
}
