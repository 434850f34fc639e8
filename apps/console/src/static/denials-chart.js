// Draws the denials chart from the JSON the page carries (no inline script: the CSP allows
// scripts from the console only).
(function () {
  const source = document.getElementById('denials-data');
  const canvas = document.getElementById('denials-chart');
  if (!source || !canvas || typeof Chart === 'undefined') return;
  const { buckets, series: data } = JSON.parse(source.textContent);
  const reasons = [...new Set(data.map((d) => d.reason))].sort();
  const palette = [
    '#c0392b',
    '#2471a3',
    '#d68910',
    '#229954',
    '#7d3c98',
    '#566573',
    '#17a589',
    '#cb4335',
  ];
  const datasets = reasons.map((reason, i) => ({
    label: reason,
    backgroundColor: palette[i % palette.length],
    maxBarThickness: 28,
    data: buckets.map((b) => {
      const hit = data.find((d) => d.bucket === b && d.reason === reason);
      return hit ? hit.count : 0;
    }),
  }));
  new Chart(canvas, {
    type: 'bar',
    // 2026-12-01T09:00Z → 12-01 09h
    data: { labels: buckets.map((b) => b.slice(5, 13).replace('T', ' ') + 'h'), datasets },
    options: {
      animation: false,
      maintainAspectRatio: false,
      scales: {
        x: { stacked: true },
        y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } },
      },
    },
  });
  canvas.dataset.rendered = String(data.reduce((n, d) => n + d.count, 0));
})();
