package introspect

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/telemetry"
)

// namespace prefixes every metric.
const namespace = "execute_code"

// scrapeTimeout bounds the snapshot one scrape takes.
const scrapeTimeout = 5 * time.Second

var (
	runBuckets       = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	roundTripBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
)

// Metrics is a Prometheus collector over the runtime's telemetry events
// (counters and duration histograms), its helper round trips, and its
// snapshot (gauges, read at each scrape). Every label value comes from a
// fixed list. It is an Immediate telemetry handler: counting is atomic.
type Metrics struct {
	snapshot func(context.Context) (Snapshot, error)
	dropped  func() uint64

	runs          *prometheus.CounterVec
	runDuration   prometheus.Histogram
	runRPCCalls   prometheus.Counter
	runRPCDenied  prometheus.Counter
	roundTrips    *prometheus.HistogramVec
	started       prometheus.Counter
	stopped       *prometheus.CounterVec
	crashed       *prometheus.CounterVec
	reaped        *prometheus.CounterVec
	evictions     prometheus.Counter
	cellsStarted  prometheus.Counter
	cellsStopped  *prometheus.CounterVec
	cellsCanceled *prometheus.CounterVec
	cellDuration  *prometheus.HistogramVec
	droppedLate   prometheus.Counter
	fallbacks     *prometheus.CounterVec
	denials       *prometheus.CounterVec
	apprRequested *prometheus.CounterVec
	apprResolved  *prometheus.CounterVec

	events []prometheus.Collector

	up, live, capacity, phases, inflight, queued, deepest, owners, forked, eventsDropped *prometheus.Desc
	nodeCapacity, nodeKernels                                                            *prometheus.Desc
}

// NewMetrics builds the collector. snapshot is read at every scrape for
// the gauges (nil: no gauges); dropped, if set, reports the telemetry
// events the bus could not deliver.
func NewMetrics(snapshot func(context.Context) (Snapshot, error), dropped func() uint64) *Metrics {
	m := &Metrics{snapshot: snapshot, dropped: dropped}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
		m.events = append(m.events, c)
		return c
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
		m.events = append(m.events, c)
		return c
	}
	m.runs = counterVec("runs_total", "Per-call runs (fallback runs included), by whether python exited zero, non-zero, or not at all (timeout, cancel).", "exit")
	m.runDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "run_duration_seconds",
		Help: "Wall time of per-call runs.", Buckets: runBuckets})
	m.events = append(m.events, m.runDuration)
	m.runRPCCalls = counter("run_rpc_calls_total", "Helper calls charged to per-call runs.")
	m.runRPCDenied = counter("run_rpc_denied_total", "Helper calls of per-call runs refused by policy, approval or authentication.")
	m.roundTrips = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "helper_round_trip_seconds",
		Help: "Helper calls, from claim to published answer (approval waits included), both modes.", Buckets: roundTripBuckets},
		[]string{"tool", "outcome"})
	m.events = append(m.events, m.roundTrips)
	m.started = counter("sessions_started_total", "Kernels started.")
	m.stopped = counterVec("sessions_stopped_total", "Kernels that ended as asked, by reason.", "reason")
	m.crashed = counterVec("sessions_crashed_total", "Kernels that failed to start or died on their own, by reason.", "reason")
	m.reaped = counterVec("sessions_reaped_total", "Kernels the reaper stopped, by reason.", "reason")
	m.evictions = counter("evictions_total", "Idle kernels evicted to admit a new one under the cap.")
	m.cellsStarted = counter("cells_started_total", "Cells dispatched to a kernel.")
	m.cellsStopped = counterVec("cells_stopped_total", "Cells ended, by outcome.", "outcome")
	m.cellsCanceled = counterVec("cells_cancelled_total", "Cells whose kernel was discarded, by cause.", "cause")
	m.cellDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "cell_duration_seconds",
		Help: "Cell durations, by outcome.", Buckets: runBuckets}, []string{"outcome"})
	m.events = append(m.events, m.cellDuration)
	m.droppedLate = counter("dropped_late_output_bytes_total", "Output bytes earlier cells' threads wrote during later cells, dropped.")
	m.fallbacks = counterVec("fallbacks_total", "Session calls that ran isolated, and kernel stops that failed (stop_failed), by reason.", "reason")
	m.denials = counterVec("bridge_denials_total", "Bridge requests (session) and frames (either mode) refused for failed authentication.", "reason")
	m.apprRequested = counterVec("approvals_requested_total", "Approval prompts registered, by helper.", "tool")
	m.apprResolved = counterVec("approvals_resolved_total", "Approval prompts ended, by helper and decision.", "tool", "decision")
	m.preset()

	gauge := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	m.up = gauge("snapshot_up", "1 when the last scrape could read the kernel snapshot.")
	m.live = gauge("live_kernels", "Live kernels.")
	m.capacity = gauge("kernel_capacity", "The live-kernel cap in effect.")
	m.phases = gauge("kernels", "Live kernels by phase; unreachable includes kernels still stopping.", "phase")
	m.inflight = gauge("inflight_cells", "Calls holding a kernel, queued or active.")
	m.queued = gauge("queued_cells", "Cells waiting behind an active cell, over all kernels.")
	m.deepest = gauge("deepest_queue", "The longest queue of one kernel.")
	m.owners = gauge("owners", "Sessions holding at least one kernel.")
	m.forked = gauge("forked_owners", "Sessions holding a fork of a shared kernel.")
	m.nodeCapacity = gauge("cluster_node_capacity", "A cluster session side's nodes: each one's kernel capacity, by node (its address, or local).", "node")
	m.nodeKernels = gauge("cluster_node_kernels", "A cluster session side's nodes: each one's live kernels, by node (its address, or local).", "node")
	m.eventsDropped = gauge("telemetry_events_dropped_total", "Telemetry events not delivered to a subscriber (its queue was full, or the bus closed).")
	return m
}

// preset creates every labelled series at zero, so a dashboard sees each
// reason before it first happens.
func (m *Metrics) preset() {
	for _, e := range []string{"zero", "nonzero", "none"} {
		m.runs.WithLabelValues(e)
	}
	for _, r := range telemetry.SessionStopReasons {
		m.stopped.WithLabelValues(r.String())
	}
	for _, r := range telemetry.SessionCrashReasons {
		m.crashed.WithLabelValues(r.String())
	}
	for _, r := range telemetry.SessionReapReasons {
		m.reaped.WithLabelValues(r.String())
	}
	for _, o := range telemetry.CellOutcomes {
		m.cellsStopped.WithLabelValues(o.String())
	}
	for _, c := range telemetry.CancelCauses {
		m.cellsCanceled.WithLabelValues(c.String())
	}
	for _, r := range telemetry.FallbackReasons {
		m.fallbacks.WithLabelValues(r.String())
	}
	m.denials.WithLabelValues(telemetry.DenyAuthentication)
}

// Handle counts one event. It never fails.
func (m *Metrics) Handle(e telemetry.Event) {
	switch e := e.(type) {
	case telemetry.ExecuteCodeStop:
		exit := "none"
		switch {
		case e.ExitCode != nil && *e.ExitCode == 0:
			exit = "zero"
		case e.ExitCode != nil:
			exit = "nonzero"
		}
		m.runs.WithLabelValues(exit).Inc()
		m.runDuration.Observe(seconds(e.Duration))
		m.runRPCCalls.Add(float64(max(e.RPCCalls, 0)))
		m.runRPCDenied.Add(float64(max(e.RPCDenied, 0)))
	case telemetry.SessionStart:
		m.started.Inc()
	case telemetry.SessionStop:
		m.stopped.WithLabelValues(e.Reason.String()).Inc()
	case telemetry.SessionCrash:
		m.crashed.WithLabelValues(e.Reason.String()).Inc()
	case telemetry.SessionReap:
		m.reaped.WithLabelValues(e.Reason.String()).Inc()
	case telemetry.SessionEvict:
		m.evictions.Inc()
	case telemetry.CellStart:
		m.cellsStarted.Inc()
	case telemetry.CellStop:
		m.cellsStopped.WithLabelValues(e.Outcome.String()).Inc()
		m.cellDuration.WithLabelValues(e.Outcome.String()).Observe(seconds(e.Duration))
		m.droppedLate.Add(float64(max(e.DroppedLateOutput, 0)))
	case telemetry.CellCancel:
		m.cellsCanceled.WithLabelValues(e.Cause.String()).Inc()
	case telemetry.Fallback:
		m.fallbacks.WithLabelValues(e.Reason.String()).Inc()
	case telemetry.BridgeDeny:
		m.denials.WithLabelValues(telemetry.DenyAuthentication).Inc()
	case telemetry.ApprovalRequested:
		m.apprRequested.WithLabelValues(e.Tool.String()).Inc()
	case telemetry.ApprovalResolved:
		m.apprResolved.WithLabelValues(e.Tool.String(), e.Decision.String()).Inc()
	}
}

// Immediate: counting never waits.
func (m *Metrics) Immediate() {}

// ObserveRoundTrip records one answered helper call; it is a
// pump.Config.OnRoundTrip.
func (m *Metrics) ObserveRoundTrip(rt pump.RoundTrip) {
	outcome := pump.RoundTripError
	switch rt.Outcome {
	case pump.RoundTripOK, pump.RoundTripDenied:
		outcome = rt.Outcome
	}
	tool := telemetry.ApprovalToolFor(rt.Tool).String()
	m.roundTrips.WithLabelValues(tool, string(outcome)).Observe(seconds(rt.Duration))
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// Describe sends every metric's description.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.events {
		c.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{m.up, m.live, m.capacity, m.phases, m.inflight, m.queued,
		m.deepest, m.owners, m.forked, m.eventsDropped, m.nodeCapacity, m.nodeKernels} {
		ch <- d
	}
}

// Collect sends the counters and histograms, then the gauges of a fresh
// snapshot (snapshot_up 0 and no gauges when it cannot be read).
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.events {
		c.Collect(ch)
	}
	if m.dropped != nil {
		ch <- prometheus.MustNewConstMetric(m.eventsDropped, prometheus.CounterValue, float64(m.dropped()))
	}
	if m.snapshot == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	s, err := m.snapshot(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, 0)
		return
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(m.up, 1)
	gauge(m.live, s.Capacity.Live)
	gauge(m.capacity, s.Capacity.Max)
	for _, p := range Phases {
		gauge(m.phases, s.Phases[p], p)
	}
	gauge(m.inflight, s.InflightCells)
	gauge(m.queued, s.Queues.Queued)
	gauge(m.deepest, s.Queues.Deepest)
	gauge(m.owners, s.Owners)
	gauge(m.forked, s.ForkedOwners)
	for _, n := range s.Nodes {
		name := n.Address
		if n.Local {
			name = "local"
		}
		gauge(m.nodeCapacity, n.Capacity, name)
		gauge(m.nodeKernels, n.Kernels, name)
	}
}
