-- tenure schema, version 2: store time runs on the host's boot clock.
-- Within one boot store time is anchor_wall + (boot clock now - anchor_boot): every process
-- of the host shares that clock and no wall-clock step moves it. The first write of a boot
-- (a new boot_id) sets the anchor at max(host wall clock, floor). NULL: never anchored
-- (an upgraded store, or only clients without a boot clock so far).
ALTER TABLE tenure_clock ADD COLUMN boot_id TEXT;
ALTER TABLE tenure_clock ADD COLUMN anchor_wall REAL;
ALTER TABLE tenure_clock ADD COLUMN anchor_boot REAL;
