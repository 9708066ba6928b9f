// A pool of ready clusters of one shape, made in the background for other
// processes to claim (`kindtest pool -- go test ./...`): what it makes,
// how it notices a claim and replaces the cluster, and how it ends.

package kindtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kindtest/kindtest/internal/docker"
)

// MaxPoolSize is the most clusters a pool keeps ready at once.
const MaxPoolSize = 8

// poolWatch is how often a pool looks for claims of its clusters.
const poolWatch = 200 * time.Millisecond

// Pool keeps ready clusters of one shape (the options given to NewPool)
// for the test processes it starts: New and Start in a process whose
// environment holds the pool's Env claim a ready cluster of the same
// shape instead of creating one, in about a second. A claimed cluster is
// fresh, used by one test and removed after it like one the test made: it
// is the claimer's (its reaper removes it should the claimer die; its keep
// policy applies), and the pool makes another. A New whose options give
// another shape, or that finds every cluster claimed and none being made,
// creates one cold and logs why.
//
// Unclaimed clusters are removed by Close, or, should the pool's process
// die, by its reaper like any cluster of a dead process. A cluster is never
// handed out twice: a claim is a container named after the cluster, which
// the engine creates once.
type Pool struct {
	id       string
	size     int // clusters kept ready or being made; shrinks on failures
	parallel int // made at once
	total    int // made in all, at most; 0: no limit
	opts     []Option
	log      Logger
	dc       *docker.Client

	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when the counts change
	ready   map[string]*Cluster
	making  int
	started int // creations started, in all
	stats   PoolStats
}

// PoolStats counts what a pool did.
type PoolStats struct {
	Size    int // clusters it keeps ready (or being made) now
	Ready   int // ready and unclaimed now
	Making  int // being made now
	Made    int // made, in all
	Claimed int // claimed by other processes, in all
	Failed  int // creations that failed, in all
}

// PoolConfig says how many clusters a pool keeps, and makes.
type PoolConfig struct {
	// Size is how many clusters are kept ready or being made, 1 to
	// MaxPoolSize: each claim starts a replacement.
	Size int
	// Parallel is how many are made at once; 0 is Size, at most one per
	// CPU. Cluster creation is CPU-bound: on 2 cores, three at once make
	// each one slower and the first one later.
	Parallel int
	// Total is the most clusters the pool makes in all, replacements
	// included; 0 is no limit. A CI job that knows it needs three
	// clusters says 3, and no replacement is made in vain.
	Total int
}

// NewPool checks the options and starts making clusters of that shape in
// the background, as cfg says. It returns at once; WaitReady waits for
// them. Options that cannot make several clusters at once are refused
// before anything is made: reuse (a pool's clusters are fresh), and a
// fixed host port (WithPortMapping with a host port other than 0).
func NewPool(ctx context.Context, cfg PoolConfig, opts ...Option) (*Pool, error) {
	size := cfg.Size
	if size < 1 || size > MaxPoolSize {
		return nil, fmt.Errorf("kindtest: pool: size %d: want 1 to %d clusters", size, MaxPoolSize)
	}
	if cfg.Parallel < 0 || cfg.Total < 0 {
		return nil, fmt.Errorf("kindtest: pool: parallel %d, total %d: want 0 (the default) or more", cfg.Parallel, cfg.Total)
	}
	parallel := cfg.Parallel
	if parallel == 0 {
		parallel = min(size, runtime.NumCPU())
	}
	// Everything New checks before it creates anything, once.
	c, _, err := prepare(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kindtest: pool: %w", err)
	}
	ccfg := c.cfg
	var errs []error
	if ccfg.reuse {
		errs = append(errs, errors.New("reuse (WithReuse or KINDTEST_REUSE): a pool's clusters are fresh, each used once; unset KINDTEST_REUSE for the pool"))
	}
	for _, pm := range ccfg.portMappings {
		if pm.hostPort != 0 && size > 1 {
			errs = append(errs, fmt.Errorf("host port %d (WithPortMapping): %d clusters cannot publish the same host port; use host port 0 (MappedAddr finds it) or a pool of 1", pm.hostPort, size))
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.docker.Close()
		return nil, fmt.Errorf("kindtest: pool: invalid options: %w", err)
	}
	p := &Pool{
		id:       strings.ReplaceAll(uuid.NewString(), "-", "")[:12],
		size:     size,
		parallel: parallel,
		total:    cfg.Total,
		log:      ccfg.logger,
		dc:       c.docker,
		changed:  make(chan struct{}),
		ready:    map[string]*Cluster{},
	}
	// The pool's clusters: its own labels, removed unless claimed (a
	// claimer's keep policy applies to its claim), and quiet: the pool
	// logs what it does.
	p.opts = append(append([]Option(nil), opts...), withPool(p.id), WithKeep(KeepNever), WithLogger(discard{}))
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.log.Printf("kindtest: pool %s: making %d cluster(s) of shape %s", p.id, size, c.shape)
	p.wg.Add(1)
	go p.run()
	return p, nil
}

// withPool marks the clusters a pool makes.
func withPool(id string) Option {
	return func(c *config) error {
		c.pool = id
		return nil
	}
}

// ID is the pool's id, the value of its clusters' LabelPool.
func (p *Pool) ID() string { return p.id }

// Env is the environment variable that makes New and Start in a process
// claim from this pool: "KINDTEST_POOL=" and the id.
func (p *Pool) Env() string { return envPool + "=" + p.id }

// Stats returns the pool's counts now.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Size, s.Ready, s.Making = p.size, len(p.ready), p.making
	return s
}

// WaitReady waits until n clusters are ready, or as many as the pool
// still keeps should failures have shrunk it below n.
func (p *Pool) WaitReady(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		ready, size, ch := len(p.ready), p.size, p.changed
		spent := p.total > 0 && p.started >= p.total && p.making == 0
		p.mu.Unlock()
		if ready >= min(n, size) {
			return nil
		}
		if spent {
			return fmt.Errorf("kindtest: pool %s: %d of %d clusters ready, and it made the %d it may make (Total)", p.id, ready, n, p.total)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kindtest: pool %s: %d of %d clusters ready: %w", p.id, ready, n, ctx.Err())
		case <-p.ctx.Done():
			return fmt.Errorf("kindtest: pool %s is closed", p.id)
		case <-ch:
		}
	}
}

// notify wakes WaitReady; p.mu is held.
func (p *Pool) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// run keeps size clusters ready or being made, and hands claimed ones
// over, until Close.
func (p *Pool) run() {
	defer p.wg.Done()
	tick := time.NewTicker(poolWatch)
	defer tick.Stop()
	for {
		p.mu.Lock()
		for len(p.ready)+p.making < p.size && p.making < p.parallel && (p.total == 0 || p.started < p.total) {
			p.started++
			p.making++
			p.wg.Add(1)
			go p.make()
		}
		p.mu.Unlock()
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
		}
		p.handOver()
	}
}

// make creates one cluster for the pool and offers it to claimers.
func (p *Pool) make() {
	defer p.wg.Done()
	start := time.Now()
	c, err := New(p.ctx, p.opts...)
	if err == nil {
		// Offered once ready: claimers look for this volume.
		l := c.Labels()
		l[LabelRole] = rolePoolReady
		if err = c.docker.CreateVolume(p.ctx, poolReadyName(c.name), l); err != nil {
			err = errors.Join(fmt.Errorf("offer cluster %s: %w", c.name, err), c.Delete(context.Background()))
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.notify()
	p.making--
	if p.ctx.Err() != nil {
		if err == nil {
			p.ready[c.name] = c // Close removes it
		}
		return
	}
	if err != nil {
		p.stats.Failed++
		// Out of memory, inotify instances or disk: making more would
		// fail every time. Claims find fewer ready and create cold.
		p.size--
		p.log.Printf("kindtest: pool %s: a cluster failed after %v; the pool shrinks to %d: %v", p.id, time.Since(start).Round(time.Millisecond), p.size, err)
		if p.size == 0 {
			p.log.Printf("kindtest: pool %s is empty: each Start now makes its cluster cold", p.id)
		}
		return
	}
	p.stats.Made++
	p.ready[c.name] = c
	p.log.Printf("kindtest: pool %s: cluster %s ready in %v", p.id, c.name, time.Since(start).Round(time.Millisecond))
}

// handOver lets go of the clusters other processes claimed: they are the
// claimers' now. The pool makes others in their place.
func (p *Pool) handOver() {
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	// Offered before the look below: only these can be missed by it.
	p.mu.Lock()
	before := make(map[string]bool, len(p.ready))
	for name := range p.ready {
		before[name] = true
	}
	p.mu.Unlock()
	claims, err := p.dc.ListContainers(ctx, map[string]string{LabelPool: p.id, LabelRole: RoleClaim})
	if err != nil {
		return // the next tick tries again
	}
	// A cluster claimed and removed between two looks leaves no claim
	// record to see: its offer is gone too.
	offers, err := p.dc.ListVolumes(ctx, map[string]string{LabelPool: p.id, LabelRole: rolePoolReady})
	if err != nil {
		return
	}
	offered := map[string]bool{}
	for _, v := range offers {
		offered[v.Labels[LabelCluster]] = true
	}
	p.mu.Lock()
	var gone []*Cluster
	var by []map[string]string
	for _, cl := range claims {
		name := cl.Labels[LabelCluster]
		if c := p.ready[name]; c != nil {
			delete(p.ready, name)
			p.stats.Claimed++
			gone = append(gone, c)
			by = append(by, cl.Labels)
		}
	}
	for name, c := range p.ready {
		if before[name] && !offered[name] {
			delete(p.ready, name)
			p.stats.Claimed++
			gone = append(gone, c)
			by = append(by, nil)
		}
	}
	if len(gone) > 0 {
		p.notify()
	}
	p.mu.Unlock()
	for i, c := range gone {
		p.release(c, by[i][LabelSession])
		if by[i] == nil {
			p.log.Printf("kindtest: pool %s: cluster %s was claimed and is removed already", p.id, c.name)
			continue
		}
		p.log.Printf("kindtest: pool %s: cluster %s claimed by pid %s", p.id, c.name, by[i][LabelOwnerPID])
	}
}

// release drops the pool's hold on a cluster claimed by session: its
// reaper and this process's signal handler no longer remove it, and its
// handle (with the LoadBalancer Services' controller) is closed. A claim
// of this process's own session (a pool and its claimer in one process)
// shares the registration with the reaper, which stays.
func (p *Pool) release(c *Cluster, session string) {
	proc.unregister(c)
	if session != Session() {
		c.unwatch()
	}
	_ = c.Close()
}

// Close stops making clusters and removes the unclaimed ones; later calls
// return the first one's error. A cluster
// being claimed right now goes to its claimer: the pool claims each one
// itself before removing it, and the engine gives a claim once.
func (p *Pool) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.close(ctx) })
	return p.closeErr
}

func (p *Pool) close(ctx context.Context) error {
	p.cancel()
	p.wg.Wait() // creations cut short remove what they made
	p.mu.Lock()
	ready := p.ready
	p.ready = map[string]*Cluster{}
	p.mu.Unlock()
	var errs []error
	for name, c := range ready {
		ok, err := createClaim(ctx, p.dc, name, p.id, c.cfg.image, c.Labels())
		switch {
		case err != nil:
			errs = append(errs, err, c.Delete(ctx))
		case !ok:
			p.release(c, "") // claimed just now, by another process
			p.mu.Lock()
			p.stats.Claimed++
			p.mu.Unlock()
		default:
			errs = append(errs, c.Delete(ctx))
		}
	}
	s := p.Stats()
	p.log.Printf("kindtest: pool %s: closed: %d made, %d claimed, %d removed unclaimed, %d failed", p.id, s.Made, s.Claimed, s.Made-s.Claimed, s.Failed)
	errs = append(errs, p.dc.Close())
	return errors.Join(errs...)
}
