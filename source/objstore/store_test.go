package objstore

import (
	"errors"
	"io"
	"testing"
)

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		a    Answer
		want bool
	}{
		{io.ErrUnexpectedEOF, Answer{}, true},
		{errors.New("connection reset by peer"), Answer{}, true},
		{errors.New("slow down"), Answer{Status: 503, Kind: Throttled}, true},
		{errors.New("internal"), Answer{Status: 500, Kind: Transient}, true},
		{errors.New("bad gateway"), Answer{Status: 502}, true},
		{errors.New("too many"), Answer{Status: 429}, true},
		{errors.New("no such key"), Answer{Status: 404, Kind: NotFound}, false},
		{errors.New("changed"), Answer{Status: 412, Kind: Changed}, false},
		{errors.New("denied"), Answer{Status: 403, Kind: Denied}, false},
		{ErrReadOnly, Answer{}, false},
		{ErrNoListing, Answer{}, false},
	} {
		if got := retryable(c.err, c.a); got != c.want {
			t.Errorf("retryable(%v, %+v) = %v, want %v", c.err, c.a, got, c.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	var o Options
	if err := o.Validate(); err != nil || o.Concurrency != DefaultConcurrency || o.PartSize != DefaultPartSize || o.Retries != DefaultRetries {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o = Options{Retries: -1}
	if err := o.Validate(); err != nil || o.Retries != 0 {
		t.Fatalf("no retries: %+v, %v", o, err)
	}
	for _, bad := range []Options{{PartSize: 1 << 20}, {Concurrency: 1000}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
