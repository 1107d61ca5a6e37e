# Recursion 200 levels deep (ARGV[0] to change), then a busy leaf.
DEPTH = (ARGV[0] || 200).to_i

def recurse(level)
  return leaf_spin if level >= DEPTH
  recurse(level + 1)
end

def leaf_spin
  s = 0
  loop { s += 1 }
end

recurse(1)
