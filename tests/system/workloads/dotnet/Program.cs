// System-test workload, .NET: burns CPU in Polyprof.SysWork.Hot.SysDotnetHot
// for BUSY_MS out of every PERIOD_MS, for at most LIFETIME_S seconds (see
// tests/system/workloads/sys_work.c).
//
// Usage: SysWork BUSY_MS PERIOD_MS LIFETIME_S
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Polyprof.SysWork
{
    public static class Hot
    {
        static long sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long SysDotnetHot(long ms)
        {
            long end = Stopwatch.GetTimestamp() + ms * Stopwatch.Frequency / 1000;
            long x = sink;
            while (Stopwatch.GetTimestamp() < end)
                for (int i = 0; i < 20000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
            sink = x;
            return x;
        }
    }

    public static class Program
    {
        public static int Main(string[] args)
        {
            long busy = long.Parse(args[0]), period = long.Parse(args[1]);
            var life = Stopwatch.StartNew();
            long lifeMs = long.Parse(args[2]) * 1000;
            Console.WriteLine("ready " + Environment.ProcessId);
            Console.Out.Flush();
            while (life.ElapsedMilliseconds < lifeMs)
            {
                var t0 = Stopwatch.StartNew();
                Hot.SysDotnetHot(busy);
                long left = period - t0.ElapsedMilliseconds;
                if (left > 0) Thread.Sleep((int)left);
            }
            return 0;
        }
    }
}
