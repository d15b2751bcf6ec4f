package geo

import (
	"net/netip"
	"testing"
)

func TestEmbeddedIPv4(t *testing.T) {
	for i, tc := range []struct {
		addr string
		n    uint
		want string
	}{
		{"2002:808:808::1", 16, "8.8.8.8"},
		{"2001:0:5ff:102::", 32, "5.255.1.2"},
		{"::ffff:81.2.69.160", 96, "81.2.69.160"},
		{"::81.2.69.160", 96, "81.2.69.160"},
		{"808:808::", 0, "8.8.8.8"},
		{"1:2:3:4:808:808::", 64, "8.8.8.8"},
		{"1:2:3:4:5:6:7:808", 112, "8.8.0.0"}, // zeros past the end
		{"1:2:3:4:5:6:7:808", 120, "8.0.0.0"},
		{"1:2:3:4:5:6:7:808", 128, "0.0.0.0"},
		{"::1:203:405:0", 72, "1.2.3.4"}, // across the halves
		{"0:0:0:1:203:405::", 56, "1.2.3.4"},
	} {
		a := u128From(netip.MustParseAddr(tc.addr))
		got := embeddedIPv4(a.hi, a.lo, tc.n)
		if want := netip.MustParseAddr(tc.want).As4(); got != uint32(want[0])<<24|uint32(want[1])<<16|uint32(want[2])<<8|uint32(want[3]) {
			t.Errorf("Test %d: embeddedIPv4(%s, %d) = %#x; want %s", i, tc.addr, tc.n, got, tc.want)
		}
	}
}

func TestBlockBits(t *testing.T) {
	for i, tc := range []struct {
		first, last string
		want        int
	}{
		{"::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 0},
		{"::", "7fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1},
		{"::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 1},
		{"2002::", "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 16},
		{"2002::", "2003:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 15},
		{"2003::", "2004:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 16}, // 2003::/15 is not aligned
		{"2001::", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", 32},
		{"2001::", "2001:1::", 32},
		{"::ffff:0:0", "::ffff:ffff:ffff", 96},
		{"::1", "::1", 128},
		{"::1", "::ff", 128},
		{"::2", "::ff", 127},
	} {
		first := u128From(netip.MustParseAddr(tc.first))
		last := u128From(netip.MustParseAddr(tc.last))
		if got := blockBits(first, last); got != tc.want {
			t.Errorf("Test %d: blockBits(%s, %s) = %d; want %d", i, tc.first, tc.last, got, tc.want)
		}
	}
}
