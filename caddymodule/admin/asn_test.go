package admin

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/edgebyte/edgelimit/internal/mmdbtest"
	"github.com/edgebyte/edgelimit/topkeys"
)

// TestTopKeysShowASN: with an asn_db, the top keys and the key view show
// the autonomous system of a key by asn (its own) or of a key that is or
// holds an address or prefix; the key view's scale is asn_multiplier's.
func TestTopKeysShowASN(t *testing.T) {
	const name = "top keys asn test"
	db := filepath.Join(t.TempDir(), "asn.mmdb")
	if err := mmdbtest.WriteASN(db, map[string]mmdbtest.AS{"8.8.8.0/24": {Number: 15169, Org: "GOOGLE"}}); err != nil {
		t.Fatal(err)
	}
	loadRules(t, `{"asn_db": "`+db+`"}`, `[{"name": "`+name+`", "limits": [{"count": 10, "window": 3600000000000}],
		"by": ["asn"], "asn_multiplier": {"AS15169": 0.5}}]`)
	var v topKeysView
	v.addEntries([]topkeys.Entry{
		{Key: "AS15169", Count: 9}, {Key: "8.8.8.8", Count: 8}, {Key: "8.8.8.0/24", Count: 7},
		{Key: "\x008.8.8.9", Count: 6}, {Key: "key-1\x1f8.8.8.10", Count: 5},
		{Key: "AS64512", Count: 4}, {Key: "9.9.9.9", Count: 3}, {Key: "ASX", Count: 2},
	})
	got, _ := json.Marshal(v.Keys)
	want := `[{"key":"AS15169","asn":"AS15169","asn_org":"GOOGLE","count":9,"error":0},` +
		`{"key":"8.8.8.8","asn":"AS15169","asn_org":"GOOGLE","count":8,"error":0},` +
		`{"key":"8.8.8.0/24","asn":"AS15169","asn_org":"GOOGLE","count":7,"error":0},` +
		`{"key":"\u00008.8.8.9","asn":"AS15169","asn_org":"GOOGLE","count":6,"error":0},` +
		`{"key":"key-1\u001f8.8.8.10","asn":"AS15169","asn_org":"GOOGLE","count":5,"error":0},` +
		`{"key":"AS64512","count":4,"error":0},{"key":"9.9.9.9","count":3,"error":0},{"key":"ASX","count":2,"error":0}]`
	if string(got) != want {
		t.Errorf("top keys:\n%s\nwant\n%s", got, want)
	}
	e := inForce(t, name)
	for _, c := range []struct {
		key, asn string
		scale    float64
		limit    int64
	}{{"AS15169", "AS15169", 0.5, 5}, {"AS64512", "", 1, 10}} {
		k := describeKey(e, c.key, "")
		if k.ASN != c.asn || k.Scale != c.scale || k.Limits[0].Limit != c.limit {
			t.Errorf("%s: asn %q scale %v limit %d; want %q %v %d", c.key, k.ASN, k.Scale, k.Limits[0].Limit, c.asn, c.scale, c.limit)
		}
	}
}
