export default {
  name: 'reopen', group: 'startup', kind: 'reopen',
  title: 'Reopen in a new browser session (warm HTTP cache): load, open, count rows',
};
