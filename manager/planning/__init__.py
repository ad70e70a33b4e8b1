"""How many slots each queue gets and where: the planner and its formula, bursts, the dead
band (settle, stabilise), placement, minimum room, the plan guard and the plan's inputs.
Pure logic over storage's models; emits events."""
