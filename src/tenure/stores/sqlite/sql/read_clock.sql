SELECT max(floor, :host_now) FROM tenure_clock WHERE id = 0
