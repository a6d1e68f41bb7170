UPDATE tenure_clock SET floor = max(floor, :host_now) WHERE id = 0 RETURNING floor
