package limiter

import (
	"testing"
	"time"
)

// FuzzSnapshot decodes arbitrary snapshots: the input whole, and the
// input as a body framed with a valid header and checksum (so that the
// fuzzer reaches the body's decoder past the CRC). Decoding must never
// panic, and a limiter restored from what decodes must decide requests
// without panicking. The corpus starts from valid snapshots of every
// algorithm, full and delta, and of blocks.
func FuzzSnapshot(f *testing.F) {
	for _, algo := range allAlgorithms {
		cfg := Config{Algorithm: algo, Limits: []Limit{{5, time.Hour}, {9, 24 * time.Hour}}}
		if algo == LeakyBucket {
			cfg = Config{Algorithm: algo, Limits: []Limit{{5, time.Hour}}, Burst: 3, MaxDelay: time.Hour}
		}
		l := mustNew(f, cfg)
		passes(l, "a", base, 3)
		passes(l, "b", base.Add(time.Second), 2)
		snap := full(l, base)
		f.Add(snap)
		f.Add(append([]byte{snap[5]}, snap[snapHeaderBytes:len(snap)-snapTrailerBytes]...))
		passes(l, "a", base, 1)
		l.Delete("b")
		delta, _ := l.AppendSnapshot(nil, base, false)
		f.Add(append([]byte{delta[5]}, delta[snapHeaderBytes:len(delta)-snapTrailerBytes]...))
	}
	b := mustBlocks(f, []time.Duration{time.Minute}, 0, 0)
	b.OffendAt("k", base)
	bs := b.AppendSnapshot(nil, base)
	f.Add(append([]byte{bs[5]}, bs[snapHeaderBytes:len(bs)-snapTrailerBytes]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		tryRestore(t, data)
		if len(data) == 0 {
			return
		}
		framed := appendSnapHeader(nil, data[0], base.UnixNano())
		framed = append(framed, data[1:]...)
		tryRestore(t, appendSnapTrailer(framed, 0))
	})
}

// tryRestore restores data as a limiter's snapshot and as blocks, and
// decides a few requests on what it restored.
func tryRestore(t *testing.T, data []byte) {
	r := NewRestore(base)
	if r.Add(data) == nil {
		for _, cfg := range []Config{
			r.cfg,
			{Limits: []Limit{{3, time.Minute}}},
			{Algorithm: TokenBucket, Limits: []Limit{{3, time.Minute}}, Burst: 2},
		} {
			l := mustNew(t, cfg)
			if _, err := r.Into(l); err != nil {
				t.Fatal(err)
			}
			for _, at := range []time.Duration{0, time.Minute, -time.Hour} {
				for _, key := range []string{"a", "b", "c"} {
					l.AllowAt(key, base.Add(at), 1)
					l.Refund(key, Taken{At: base.Add(at), Cost: 1, Scale: 1}, base.Add(at))
					l.Charge(key, base.Add(at), 2, 0.5)
				}
			}
			l.SweepAt(base)
		}
	}
	b := mustBlocks(t, []time.Duration{time.Minute}, 0, 10)
	if _, err := b.RestoreSnapshot(data, base); err == nil {
		b.ListAt(base, 0)
		b.OffendAt("k", base)
	}
}
