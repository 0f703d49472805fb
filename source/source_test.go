package source

import "testing"

func TestSliceBufs(t *testing.T) {
	a, b := make([]byte, 4), make([]byte, 6)
	out := SliceBufs([][]byte{a, b}, 2, 7)
	if len(out) != 2 || len(out[0]) != 2 || len(out[1]) != 3 || cap(out[1]) != 3 {
		t.Fatalf("SliceBufs: %d parts", len(out))
	}
	if &out[0][0] != &a[2] || &out[1][0] != &b[0] {
		t.Fatal("SliceBufs copied instead of sharing")
	}
}

func TestFillExtentParts(t *testing.T) {
	// A file of three parts of 3, 4 and 5 bytes; bytes [2, 10) touch all three.
	e := Extent{Size: 12, Parts: []Extent{{Name: "a", Size: 3}, {Name: "b", Size: 4}, {Name: "c", Size: 5}}}
	type call struct {
		name   string
		off, n int64
	}
	var calls []call
	buf := make([]byte, 8)
	err := FillExtent(e, 2, [][]byte{buf[:5], buf[5:]}, func(p Extent, off int64, bufs [][]byte) error {
		calls = append(calls, call{p.Name, off, int64(Len(bufs))})
		return nil
	})
	want := []call{{"a", 2, 1}, {"b", 0, 4}, {"c", 0, 3}}
	if err != nil || len(calls) != len(want) {
		t.Fatalf("calls %v, err %v", calls, err)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("call %d: %v, want %v", i, calls[i], want[i])
		}
	}
	// A single extent is filled whole, once.
	calls = nil
	_ = FillExtent(Extent{Name: "x", Size: 8}, 1, [][]byte{buf[:4]}, func(p Extent, off int64, bufs [][]byte) error {
		calls = append(calls, call{p.Name, off, int64(Len(bufs))})
		return nil
	})
	if len(calls) != 1 || calls[0] != (call{"x", 1, 4}) {
		t.Fatalf("single extent: %v", calls)
	}
}
