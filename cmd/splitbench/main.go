// Command splitbench times the split Lambda's parsing and boundary core on a local file: the same
// records.Split call the Lambda makes, with the S3 object replaced by the file and the manifest by
// a counter. It prints one line, "bytes=… records=… chunks=… seconds=… MBps=… maxrss_MB=…", for
// scripts/bench.sh to compare with the reference splitter.
//
// With -gen ROWS it instead writes a benchmark CSV like ../shared/bench/gen_csv.py's (10 columns,
// Japanese text, quoted fields), for machines without the shared reference scripts.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

func main() {
	encoding := flag.String("encoding", pipeline.EncodingUTF8, "utf-8 or cp932")
	format := flag.String("format", pipeline.FormatCSV, "csv or jsonl")
	chunkSize := flag.Int("chunk-size", pipeline.DefaultChunkSize, "records per chunk")
	onInvalid := flag.String("on-invalid", pipeline.OnInvalidFailFile, "failFile or skipRecord: the tenant's onInvalidRecord (skipRecord keeps each record's raw bytes until it is known valid)")
	gen := flag.Int("gen", 0, "write a benchmark CSV of this many rows to the file instead of splitting it")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: splitbench [-encoding utf-8|cp932] [-format csv|jsonl] [-on-invalid failFile|skipRecord] [-gen ROWS] FILE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	if *gen > 0 {
		err = generate(flag.Arg(0), *gen, *encoding)
	} else {
		var r result
		if r, err = run(flag.Arg(0), pipeline.Tenant{Tenant: spec.Tenant{Format: *format, Encoding: *encoding, OnInvalidRecord: *onInvalid}}, *chunkSize); err == nil {
			fmt.Printf("bytes=%d records=%d chunks=%d seconds=%.3f MBps=%.1f maxrss_MB=%.0f rejected=%d\n",
				r.bytes, r.records, r.chunks, r.seconds, float64(r.bytes)/r.seconds/1e6, r.maxRSSMB, r.rejected)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "splitbench:", err)
		os.Exit(1)
	}
}

type result struct {
	bytes, records int64
	rejected       int64
	chunks         int
	seconds        float64
	maxRSSMB       float64
}

func run(path string, t pipeline.Tenant, chunkSize int) (result, error) {
	f, err := records.FormatOf(t)
	if err != nil {
		return result{}, err
	}
	file, err := os.Open(path)
	if err != nil {
		return result{}, err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return result{}, err
	}
	boundaries := 0
	start := time.Now()
	// records.Scan is Split's call: SplitCut under failFile, SplitCutSkip under skipRecord.
	sum, _, err := records.Scan(file, f, records.Cut{Records: chunkSize}, records.PolicyOf(t), func(pipeline.Boundary) error { boundaries++; return nil })
	seconds := time.Since(start).Seconds()
	if err != nil {
		return result{}, err
	}
	if boundaries != sum.Chunks+1 {
		return result{}, fmt.Errorf("got %d boundaries, want %d", boundaries, sum.Chunks+1)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return result{}, err
	}
	// Linux reports ru_maxrss in KiB.
	return result{bytes: info.Size(), records: sum.Records, rejected: sum.Invalid, chunks: sum.Chunks, seconds: seconds, maxRSSMB: float64(ru.Maxrss) / 1024}, nil
}

// generate writes rows like gen_csv.py does; the bytes differ, the shape does not.
func generate(path string, rows int, encoding string) (err error) {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := file.Close(); err == nil {
			err = cerr
		}
	}()
	var w io.Writer = file
	if encoding == pipeline.EncodingCP932 {
		w = japanese.ShiftJIS.NewEncoder().Writer(file)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	rng := rand.New(rand.NewPCG(42, 42))
	cities := []string{"東京", "大阪", "Nagoya", "Fukuoka"}
	statuses := []string{"new", "paid", "shipped"}
	fmt.Fprint(bw, "id,name,email,city,amount,qty,sku,date,note,status\r\n")
	for i := range rows {
		fmt.Fprintf(bw, "%08d,顧客%d,user%d@example.com,%s,%.2f,%d,SKU-%07d,2026-%02d-%02d,\"%s\",%s\r\n",
			i, i, i, cities[rng.IntN(len(cities))], rng.Float64()*100000, 1+rng.IntN(99), rng.IntN(1000001),
			1+rng.IntN(12), 1+rng.IntN(28), strings.Repeat("備考, ", 1+rng.IntN(8)), statuses[rng.IntN(len(statuses))])
	}
	return bw.Flush()
}
