-- now(): the store's time. With the test hook it raises the floor, like a write.
{include:_clock}
SELECT clock.now FROM clock
