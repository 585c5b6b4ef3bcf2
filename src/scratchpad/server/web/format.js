// How numbers look: durations, sizes, times.

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 && !Number.isInteger(seconds) ? 1 : 0)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.floor(seconds % 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** Seconds since `epoch` (seconds), never negative. */
export function since(epoch) {
  return Math.max(0, Date.now() / 1000 - epoch);
}

export function bytes(count) {
  if (count === null || count === undefined || !Number.isFinite(count)) return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = count;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** "12 s ago", "3 min ago", or a date for older times. */
export function ago(epoch) {
  if (!epoch || !Number.isFinite(epoch)) return "—";
  const seconds = since(epoch);
  if (seconds < 5) return "just now";
  if (seconds < 60) return `${Math.floor(seconds)} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(epoch * 1000).toLocaleString();
}

/** A moment as local date and time: epoch seconds or an ISO 8601 string ("—" when unknown). */
export function stamp(when) {
  const date = typeof when === "string" ? new Date(when) : new Date(Number(when) * 1000);
  return when && !Number.isNaN(date.getTime()) ? date.toLocaleString() : "—";
}
