package geo

import (
	"net/netip"
	"testing"
)

func TestCodeCache(t *testing.T) {
	var c codeCache
	if _, hit := c.get(0); hit {
		t.Error("empty cache: offset 0 found")
	}
	c.put(0, 5)
	c.put(100, -1)
	c.put(200, numCodes-1)
	for i, tc := range []struct {
		offset uintptr
		index  int
		hit    bool
	}{
		{0, 5, true},
		{100, -1, true},
		{200, numCodes - 1, true},
		{300, 0, false},
		{1 << 40, 0, false},
	} {
		index, hit := c.get(tc.offset)
		if index != tc.index || hit != tc.hit {
			t.Errorf("Test %d: get(%d) = %d, %v; want %d, %v", i, tc.offset, index, hit, tc.index, tc.hit)
		}
	}
	// A record that maps to a taken slot evicts the one there.
	other := uintptr(1)
	for c.slot(other) != c.slot(0) {
		other++
	}
	c.put(other, 7)
	if _, hit := c.get(0); hit {
		t.Error("evicted offset 0 still found")
	}
	if index, hit := c.get(other); index != 7 || !hit {
		t.Errorf("get(%d) = %d, %v; want 7, true", other, index, hit)
	}
}

// Lookups give the same answers with the cache cold, warm, and emptied.
func TestCountryCacheConsistent(t *testing.T) {
	db := openDB(t, buildDB(t, "GeoIP2-City", 6, 28, cityNetworks()).path)
	addrs := []string{"5.255.1.2", "8.8.8.8", "2a02:6b8::1", "1.0.0.1", "217.65.50.1", "9.9.9.9"}
	want := []string{"RU", "US", "RU", "", "", ""}
	for round := range 3 {
		if round == 2 {
			for i := range db.cache {
				db.cache[i].Store(0)
			}
		}
		for i, s := range addrs {
			if got, _ := db.Country(netip.MustParseAddr(s)); got != want[i] {
				t.Errorf("round %d: Country(%s) = %q; want %q", round, s, got, want[i])
			}
		}
	}
}
