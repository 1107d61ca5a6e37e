// Test workload for the polyprof .NET plugin: known method names, a 3:1 CPU
// split between two methods, a generic method, a lambda and async code, each
// on its own thread so a profile can attribute them unambiguously.
//
// Usage: PolyprofWorkload [seconds] [mode]
//   mode "all" (default): split + generic + lambda + async threads
//   mode "bench": one thread doing fixed work units; prints units/s on exit
//   otherwise a comma list of behaviours, one thread each:
//     split       the 3:1 split
//     generic     a generic method of a generic type
//     lambda      a lambda
//     async       an async method (state machine MoveNext)
//     exceptions  throws and catches in a loop
//     framework   System.Text.Json, LINQ and Regex: time spent in framework
//                 code (ReadyToRun unless re-JITted)
//     wait        the behaviours start only once a line is read on stdin
//                 (a profiler can attach before any of their code is bound)
//     stdin-exit  the process exits (code 0) when its stdin reaches its end
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Text.Json;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace Polyprof.Workload
{
    public static class Hot
    {
        // Spin for roughly `ms` milliseconds doing integer work; the clock is
        // read rarely so the time is spent in this method's own code.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Spin(long ms, long seed)
        {
            long end = Stopwatch.GetTimestamp() + ms * Stopwatch.Frequency / 1000;
            long x = seed;
            while (true)
            {
                for (int i = 0; i < 20000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
                if (Stopwatch.GetTimestamp() >= end) return x;
            }
        }
    }

    public static class SplitWorker
    {
        // The split is by work, not by time: SpinA and SpinB run the same
        // loop body, A for three times as many iterations as B. A wall-clock
        // split would not survive preemption or the runtime's suspensions.
        const long Unit = 4000000;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long ThreeQuarters(long seed) { return SpinA(3 * Unit, seed); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long OneQuarter(long seed) { return SpinB(Unit, seed); }

        // Separate bodies (not calls into Hot.Spin) so the frame under test
        // is this method's own code.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static long SpinA(long n, long seed)
        {
            long x = seed;
            for (long i = 0; i < n; i++) x = x * 6364136223846793005L + 1442695040888963407L;
            return x;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static long SpinB(long n, long seed)
        {
            long x = seed;
            for (long i = 0; i < n; i++) x = x * 2862933555777941757L + 3037000493L;
            return x;
        }

        public static void Run(CancellationToken ct)
        {
            long s = 1;
            while (!ct.IsCancellationRequested)
            {
                s = ThreeQuarters(s);
                s = OneQuarter(s);
            }
            GC.KeepAlive(s);
        }
    }

    public class GenericBox<T>
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public long GenericCompute<U>(U value, int rounds)
        {
            long h = value.GetHashCode();
            for (int r = 0; r < rounds; r++) h = Hot.Spin(5, h);
            return h;
        }
    }

    public static class LambdaWorker
    {
        public static void Run(CancellationToken ct)
        {
            // NoInlining: otherwise tier-1 PGO inlines the delegate into Run
            // and the lambda frame disappears from the stacks
            Func<long, long> lambdaBody = [MethodImpl(MethodImplOptions.NoInlining)] (long seed) => Hot.Spin(5, seed);
            long s = 3;
            while (!ct.IsCancellationRequested) s = lambdaBody(s);
            GC.KeepAlive(s);
        }
    }

    public static class AsyncWorker
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task<long> AsyncCompute(long seed, CancellationToken ct)
        {
            long s = seed;
            while (!ct.IsCancellationRequested)
            {
                s = Hot.Spin(5, s);
                await Task.Delay(5);
            }
            return s;
        }
    }

    public static class ExceptionWorker
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Thrower(int i)
        {
            throw new InvalidOperationException("polyprof test exception " + i);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long ThrowAndCatch(int i)
        {
            try
            {
                Thrower(i);
            }
            catch (InvalidOperationException e)
            {
                return e.Message.Length;
            }
            return 0;
        }

        public static void Run(CancellationToken ct)
        {
            long s = 0;
            // half busy: throws for 5 ms, sleeps 5 ms
            long slice = Stopwatch.Frequency / 200;
            for (int i = 0; !ct.IsCancellationRequested;)
            {
                long end = Stopwatch.GetTimestamp() + slice;
                while (Stopwatch.GetTimestamp() < end) s += ThrowAndCatch(i++);
                Thread.Sleep(5);
            }
            GC.KeepAlive(s);
        }
    }

    public class Order
    {
        public int Id { get; set; }
        public string Customer { get; set; }
        public double Amount { get; set; }
        public List<string> Items { get; set; }
    }

    public static class FrameworkWorker
    {
        static readonly Regex Pattern = new Regex(@"(\w+)@(\w+)\.example\.(com|org)",
                                                  RegexOptions.None);

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long JsonRoundTrip(List<Order> orders)
        {
            string json = JsonSerializer.Serialize(orders);
            var back = JsonSerializer.Deserialize<List<Order>>(json);
            return json.Length + back.Count;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long LinqQuery(List<Order> orders)
        {
            return orders.Where(o => o.Amount > 10)
                .GroupBy(o => o.Customer)
                .OrderByDescending(g => g.Sum(o => o.Amount))
                .Select(g => g.Key.Length + g.Count())
                .Sum();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long RegexScan(string text)
        {
            long n = 0;
            foreach (Match m in Pattern.Matches(text)) n += m.Groups[2].Length;
            return n;
        }

        public static void Run(CancellationToken ct)
        {
            var orders = new List<Order>();
            for (int i = 0; i < 200; i++)
                orders.Add(new Order { Id = i, Customer = "customer" + (i % 17), Amount = i * 1.5,
                                       Items = new List<string> { "a" + i, "b" + i, "c" } });
            var sb = new System.Text.StringBuilder();
            for (int i = 0; i < 400; i++) sb.Append("user").Append(i).Append("@host").Append(i % 9)
                .Append(i % 2 == 0 ? ".example.com " : ".example.org ").Append("filler text ");
            string text = sb.ToString();
            long s = 0;
            while (!ct.IsCancellationRequested)
                s += JsonRoundTrip(orders) + LinqQuery(orders) + RegexScan(text);
            GC.KeepAlive(s);
        }
    }

    public static class Program
    {
        static void StartThread(string name, ThreadStart body)
        {
            var t = new Thread(body) { Name = name, IsBackground = true };
            t.Start();
        }

        public static int Main(string[] args)
        {
            int seconds = args.Length > 0 ? int.Parse(args[0]) : 30;
            string mode = args.Length > 1 ? args[1] : "all";
            var cts = new CancellationTokenSource();

            if (mode == "bench")
            {
                // Fixed-size work units on `threads` threads (args[2], default
                // 2); throughput = units per second after `warmup` seconds
                // (args[3], default 3) so that attach costs are excluded.
                int threads = args.Length > 2 ? int.Parse(args[2]) : 2;
                int warmup = args.Length > 3 ? int.Parse(args[3]) : 3;
                Console.WriteLine("ready " + Environment.ProcessId);
                long units = 0;
                bool counting = false;
                var workers = new Thread[threads];
                for (int t = 0; t < threads; t++)
                {
                    workers[t] = new Thread(() =>
                    {
                        long x = 7;
                        while (!cts.IsCancellationRequested)
                        {
                            x = SplitWorker.ThreeQuarters(x);
                            x ^= new GenericBox<int>().GetHashCode();
                            if (Volatile.Read(ref counting)) Interlocked.Increment(ref units);
                        }
                        GC.KeepAlive(x);
                    }) { IsBackground = true, Name = "bench" };
                    workers[t].Start();
                }
                Thread.Sleep(warmup * 1000);
                // CPU time of the whole process (runtime threads included:
                // the sampler, EventPipe flushing) is what profiling adds to
                // the target, and unlike wall time it is not skewed by other
                // load on a shared machine.
                var proc = Process.GetCurrentProcess();
                TimeSpan cpu0 = proc.TotalProcessorTime;
                Volatile.Write(ref counting, true);
                var sw = Stopwatch.StartNew();
                Thread.Sleep(Math.Max(1, seconds - warmup) * 1000);
                long done = Interlocked.Read(ref units);
                double secs = sw.Elapsed.TotalSeconds;
                proc.Refresh();
                double cpu = (proc.TotalProcessorTime - cpu0).TotalSeconds;
                cts.Cancel();
                Console.WriteLine("units_per_s {0:F2} units_per_cpu_s {1:F3}", done / secs,
                                  cpu > 0 ? done / cpu : 0);
                return 0;
            }

            var behaviours = new HashSet<string>(
                (mode == "all" ? "split,generic,lambda,async" : mode).Split(','));
            if (behaviours.Contains("wait"))
            {
                Console.WriteLine("waiting " + Environment.ProcessId);
                Console.In.ReadLine();
            }
            if (behaviours.Contains("split")) StartThread("split", () => SplitWorker.Run(cts.Token));
            if (behaviours.Contains("generic"))
                StartThread("generic", () =>
                {
                    var box = new GenericBox<string>();
                    long s = 0;
                    // half busy: the split thread keeps most of a loaded CPU
                    while (!cts.IsCancellationRequested)
                    {
                        s += box.GenericCompute<int>(42, 4);
                        Thread.Sleep(20);
                    }
                    GC.KeepAlive(s);
                });
            if (behaviours.Contains("lambda")) StartThread("lambda", () => LambdaWorker.Run(cts.Token));
            if (behaviours.Contains("async")) Task.Run(() => AsyncWorker.AsyncCompute(5, cts.Token));
            if (behaviours.Contains("exceptions"))
                StartThread("exceptions", () => ExceptionWorker.Run(cts.Token));
            if (behaviours.Contains("framework"))
                StartThread("framework", () => FrameworkWorker.Run(cts.Token));
            if (behaviours.Contains("stdin-exit"))
                StartThread("stdin-exit", () =>
                {
                    while (Console.In.ReadLine() != null) { }
                    Environment.Exit(0);
                });
            Console.WriteLine("ready " + Environment.ProcessId);
            Thread.Sleep(seconds * 1000);
            cts.Cancel();
            return 0;
        }
    }
}
