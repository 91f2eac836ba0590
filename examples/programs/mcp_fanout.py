# Fan out over an MCP server's tools: the time in several zones at once, then one
# conversion. The time server marks its tools read-only, so these calls overlap.
#
#     ptc run examples/programs/mcp_fanout.py --tools examples/mcp.json
import asyncio

zones = ["UTC", "Europe/Paris", "Asia/Tokyo", "America/New_York"]
now = await asyncio.gather(*(tools.time.get_current_time({"timezone": zone}) for zone in zones))
for reading in now:
    print(f"{reading['timezone']:<17} {reading['datetime'][:16]}  {reading['day_of_week']}")

standup = await tools.time.convert_time(
    {"source_timezone": "Europe/Paris", "time": "09:30", "target_timezone": "Asia/Tokyo"}
)
in_tokyo = standup["target"]["datetime"][11:16]
print(f"09:30 in Paris is {in_tokyo} in Tokyo ({standup['time_difference']})")
return {"zones": len(now), "paris_0930_in_tokyo": in_tokyo}
