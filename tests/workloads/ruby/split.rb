# Three parts of CPU in heavy_three for one part in light_one, by
# construction: the same loop body, three times the iterations. Phases last
# tens of milliseconds, much longer than the sampling period, so the sampler
# cannot alias with the loop.
def burn(n)
  s = 0
  i = 0
  while i < n
    s += i
    i += 1
  end
  s
end

def heavy_three
  burn(3_000_000)
end

def light_one
  burn(1_000_000)
end

loop do
  heavy_three
  light_one
end
