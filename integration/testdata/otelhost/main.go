// Command otelhost is an embedder that uses OpenTelemetry's metric SDK at
// its current version next to the runtime: it must build, and both must
// work in one process.
package main

import (
	"context"
	"fmt"
	"os"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

func main() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	counter, err := mp.Meter("otelhost").Int64Counter("runtimes")
	if err != nil {
		fail(err)
	}

	cfg := config.Defaults()
	cfg.Enabled = true
	rt, err := executecode.New(cfg)
	if err != nil {
		fail(err)
	}
	snap, err := rt.Snapshot(ctx)
	if err != nil {
		fail(err)
	}
	if err := rt.Close(ctx); err != nil {
		fail(err)
	}
	counter.Add(ctx, 1)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fail(err)
	}
	sum := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64])
	fmt.Printf("otel counter %d, live kernels max %d\n", sum.DataPoints[0].Value, snap.Capacity.Max)
	if err := mp.Shutdown(ctx); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "otelhost:", err)
	os.Exit(1)
}
