# Looks like a puma worker to `ps` (servers rewrite their process title),
# then burns CPU until killed.
Process.setproctitle("puma 6.4.0 (tcp://0.0.0.0:3000) [shopfront]")
def handle_request
  s = 0
  200_000.times { |i| s += i }
  s
end
loop { handle_request }
