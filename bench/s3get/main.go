// Command s3get measures what an object store gives with the client blockfs uses (minio-go),
// for make bench's object store rows:
//
//	s3get -endpoint URL -bucket B -prefix P -workers N whole
//	    GET every block object (PREFIX/blocks/*.bin) whole, N at a time: the store's ceiling
//	s3get -endpoint URL -bucket B -prefix P -workers N -record R -count C naive
//	    C ranged GETs of one R-byte record each, at random offsets of random block objects, N
//	    at a time: what a map-style Dataset over the object store does
//
//	s3get -endpoint URL -bucket B mb
//	    create the bucket
//
// It prints "bytes seconds requests". Credentials come from AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/blockfs/blockfs/internal/background"
)

func main() {
	endpoint := flag.String("endpoint", "", "store URL")
	bucket := flag.String("bucket", "", "bucket")
	prefix := flag.String("prefix", "", "dataset prefix")
	workers := flag.Int("workers", 8, "requests in flight")
	record := flag.Int64("record", 4096, "naive: record size")
	count := flag.Int("count", 20000, "naive: records to fetch")
	part := flag.Int64("part", 0, "whole: GET each object in ranged GETs of this many bytes (0: one plain GET)")
	ifMatch := flag.Bool("if-match", false, "whole: send each object's ETag in If-Match")
	flag.Parse()
	if flag.NArg() != 1 {
		fail(fmt.Errorf("give one mode: whole or naive"))
	}
	g := &getter{ctx: context.Background(), cl: client(*endpoint), bucket: *bucket}
	if flag.Arg(0) == "mb" {
		if err := g.cl.MakeBucket(g.ctx, *bucket, minio.MakeBucketOptions{}); err != nil {
			fail(err)
		}
		return
	}
	objs := g.blocks(*prefix)
	start := time.Now()
	jobs, wg := g.start(*workers)
	switch flag.Arg(0) {
	case "whole":
		for _, o := range objs {
			etag := ""
			if *ifMatch {
				etag = o.etag
			}
			if *part <= 0 {
				jobs <- g.get(o.key, 0, 0, etag)
				continue
			}
			for at := int64(0); at < o.size; at += *part {
				jobs <- g.get(o.key, at, min(*part, o.size-at), etag)
			}
		}
	case "naive":
		r := rand.New(rand.NewPCG(1, 2))
		for range *count {
			o := objs[r.IntN(len(objs))]
			jobs <- g.get(o.key, r.Int64N(o.size / *record)**record, *record, "")
		}
	default:
		fail(fmt.Errorf("unknown mode %q", flag.Arg(0)))
	}
	close(jobs)
	wg.Wait()
	el := time.Since(start).Seconds()
	if err := g.err.Err(); err != nil {
		fail(err)
	}
	fmt.Printf("%d %.3f %d\n", g.bytes.Load(), el, g.reqs.Load())
}

// client returns a minio client for the store at endpoint.
func client(endpoint string) *minio.Client {
	u, err := url.Parse(endpoint)
	if err != nil {
		fail(err)
	}
	cl, err := minio.New(u.Host, &minio.Options{Secure: u.Scheme == "https", Region: "us-east-1",
		Creds: credentials.NewStaticV4(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), "")})
	if err != nil {
		fail(err)
	}
	return cl
}

// getter runs the GETs and counts what they bring.
type getter struct {
	ctx         context.Context
	cl          *minio.Client
	bucket      string
	bytes, reqs atomic.Int64
	err         background.Latch // the first failed GET
}

type obj struct {
	key  string
	size int64
	etag string
}

// blocks lists the block objects of the dataset at prefix.
func (g *getter) blocks(prefix string) []obj {
	var objs []obj
	for oi := range g.cl.ListObjects(g.ctx, g.bucket, minio.ListObjectsOptions{Prefix: prefix + "/blocks/", Recursive: true}) {
		if oi.Err != nil {
			fail(oi.Err)
		}
		if strings.HasSuffix(oi.Key, ".bin") {
			objs = append(objs, obj{oi.Key, oi.Size, oi.ETag})
		}
	}
	if len(objs) == 0 {
		fail(fmt.Errorf("no block objects under %s/blocks/", prefix))
	}
	return objs
}

// start starts n workers that run the jobs sent on the channel returned until it is closed.
func (g *getter) start(n int) (chan<- func([]byte) error, *sync.WaitGroup) {
	jobs := make(chan func(buf []byte) error, 64)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker reads bodies into its own 1 MiB buffer, as blockfs reads into its
			// cache's 1 MiB pages: io.Copy to io.Discard reads 8 KiB at a time, and where the
			// client and the store share the cores, those reads (about 0.5 s of CPU per GiB
			// here) took cores from the store and lowered the ceiling.
			buf := make([]byte, 1<<20)
			for j := range jobs {
				if err := j(buf); err != nil {
					g.err.Set(err)
				}
			}
		}()
	}
	return jobs, &wg
}

// get returns a job that GETs n bytes of key from off (n = 0: the whole object), with
// If-Match etag unless etag is empty.
func (g *getter) get(key string, off, n int64, etag string) func([]byte) error {
	return func(buf []byte) error {
		var opt minio.GetObjectOptions
		if etag != "" {
			_ = opt.SetMatchETag(etag)
		}
		if n > 0 {
			_ = opt.SetRange(off, off+n-1)
		}
		o, err := g.cl.GetObject(g.ctx, g.bucket, key, opt)
		if err != nil {
			return err
		}
		defer o.Close()
		k, err := drain(o, buf)
		g.bytes.Add(k)
		g.reqs.Add(1)
		return err
	}
}

// drain reads r to its end into buf, over and over, and returns the bytes read.
func drain(r io.Reader, buf []byte) (int64, error) {
	var k int64
	for {
		n, err := io.ReadFull(r, buf)
		k += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return k, nil
		}
		if err != nil {
			return k, err
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "s3get:", err)
	os.Exit(1)
}
