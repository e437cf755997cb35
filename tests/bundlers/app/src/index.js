// A bundled app: the package imported as a user imports it, no bundler configuration.
import * as cairn from 'cairn-db';

window.cairn = cairn;
window.cairnReady = true;
